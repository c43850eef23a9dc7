"""Every test starts from the same random state: a failure reproduces, and a tolerance
met once is met on every run (tolerances are still set for any input)."""

import logging
import warnings

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    np.random.seed(0)


@pytest.fixture
def quiet_transformers():
    """transformers' logs and warnings silenced (tests of tiny transformers models)."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    logger.setLevel(level)
