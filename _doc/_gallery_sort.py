"""Order of the gallery scripts: by tier (101, 102, 201, 301), recipes by topic."""

import os
import re


class TierSortKey:
    """Sort key for sphinx-gallery's ``within_subsection_order``.

    ``plot_<topic>_<tier>.py`` sorts by tier then name;
    ``plot_exporter_recipes_<oe|c>_<topic>.py`` by topic, torch.onnx.export first.
    """

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename: str) -> tuple:
        name = os.path.basename(filename)
        recipe = re.match(r"plot_exporter_recipes_(oe|c)_(.+)\.py$", name)
        if recipe:
            return (recipe.group(2), recipe.group(1) != "oe", name)
        tier = re.search(r"_(\d{3})\.py$", name)
        return (tier.group(1) if tier else "999", name, "")
