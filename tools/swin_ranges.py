"""torchvision's Swin-T exported with dynamic height and width: the valid ranges the
export reports against the sizes where onnxruntime matches eager PyTorch.

torchvision on the registry is a CUDA build for torch 2.13 whose C++ operators do not
load on this CPU torch; its Python model code runs once the schemas of the three
operators its extension would register are defined::

    pip download --no-deps -d /tmp/tv torchvision
    pip install --no-deps --target /tmp/tv/site /tmp/tv/torchvision-*.whl
    PYTHONPATH=/tmp/tv/site python tools/swin_ranges.py
"""

import json
import warnings

import torch

_LIB = torch.library.Library("torchvision", "DEF")
_LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_LIB.define(
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor"
)


def main() -> None:
    import onnxruntime
    import torchvision

    from experimental_experiment.torch_interpreter import to_onnx
    from experimental_experiment.torch_interpreter.capture.guard_ranges import METADATA_KEY

    torch.manual_seed(0)
    model = torchvision.models.swin_t().eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(
            model,
            (torch.randn(2, 3, 64, 96),),
            dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
        )
    for w in caught:
        if "ConstrainedDimension" in w.category.__name__:
            print("warning:", str(w.message).split(": outside")[0])
    ranges = json.loads({p.key: p.value for p in onx.metadata_props}[METADATA_KEY])
    print("metadata:", ranges)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])

    def diff(h, w):
        x = torch.randn(1, 3, h, w)
        with torch.no_grad():
            expected = model(x).numpy()
        return float(abs(expected - sess.run(None, {"x": x.numpy()})[0]).max())

    print("| size | inside the reported range | max abs diff |")
    print("|---|---|---|")
    for name, axis, sizes in (
        ("height", "x.shape[2]", range(48, 137, 8)),
        ("width", "x.shape[3]", range(76, 133, 4)),
    ):
        r = ranges.get(axis, {"min": None, "max": None})
        for s in sizes:
            h, w = (s, 96) if name == "height" else (64, s)
            inside = (r["min"] is None or s >= r["min"]) and (r["max"] is None or s <= r["max"])
            print(f"| {name}={s} | {'yes' if inside else 'no'} | {diff(h, w):.3g} |")


if __name__ == "__main__":
    main()
