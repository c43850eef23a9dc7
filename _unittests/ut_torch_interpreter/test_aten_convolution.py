"""Convolution, pooling, padding, upsampling and embedding converters against onnxruntime
and eager torch, with dynamic shapes checked on a second shape."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import ExportOptions
from experimental_experiment.torch_interpreter.convert.registry import find_converter

DS1 = ({0: "batch", 2: "n"},)
DS2 = ({0: "batch", 2: "h", 3: "w"},)
DS3 = ({0: "batch", 2: "d", 3: "h", 4: "w"},)
DECOMPOSE = ExportOptions(decomposition_table="default")


def _tol(dtype):
    return dict(atol=1e-2, rtol=1e-2) if dtype == torch.float16 else {}


def _x1(c=3, dtype=torch.float32):
    return [(torch.randn(2, c, 9).to(dtype),), (torch.randn(3, c, 12).to(dtype),)]


def _x2(c=3, dtype=torch.float32):
    return [(torch.randn(2, c, 8, 9).to(dtype),), (torch.randn(3, c, 11, 7).to(dtype),)]


def _x3(c=2):
    return [(torch.randn(2, c, 5, 6, 7),), (torch.randn(3, c, 6, 4, 5),)]


# convolution

CONV2D = {
    "default": dict(),
    "stride_pad": dict(stride=2, padding=1),
    "dilation": dict(dilation=2, padding=(2, 1)),
    "groups": dict(groups=3, padding=1),
    "same": dict(padding="same"),
    "same_dilation": dict(padding="same", dilation=(2, 1)),
    "valid": dict(padding="valid", bias=False),
    "rect": dict(stride=(1, 2), padding=(0, 1)),
}


@pytest.mark.parametrize("name", sorted(CONV2D))
def test_conv2d(name):
    kernel = (3, 2) if name == "same" else 3
    model = torch.nn.Conv2d(3, 6, kernel, **CONV2D[name])
    check_export(model, _x2(), dynamic_shapes=DS2)


@pytest.mark.parametrize("name", ["stride_pad", "groups", "same"])
def test_conv2d_decomposed(name):
    # aten.convolution.default
    kernel = (3, 2) if name == "same" else 3
    model = torch.nn.Conv2d(3, 6, kernel, **CONV2D[name])
    check_export(model, _x2(), dynamic_shapes=DS2, export_options=DECOMPOSE)


@pytest.mark.parametrize("padding", [0, 1, "same", "valid"])
def test_conv1d(padding):
    model = torch.nn.Conv1d(3, 4, 3, padding=padding)
    check_export(model, _x1(), dynamic_shapes=DS1)


def test_conv1d_stride_dilation_groups():
    model = torch.nn.Conv1d(4, 8, 3, stride=2, dilation=2, groups=2, padding=2)
    check_export(model, _x1(c=4), dynamic_shapes=DS1)


def test_conv3d():
    model = torch.nn.Conv3d(2, 4, 3, stride=(1, 2, 1), padding=1)
    check_export(model, _x3(), dynamic_shapes=DS3)


def test_conv2d_float16():
    model = torch.nn.Conv2d(3, 4, 3, padding=1).half()
    check_export(model, _x2(dtype=torch.float16), dynamic_shapes=DS2, **_tol(torch.float16))


def test_conv2d_unbatched():
    model = torch.nn.Conv2d(3, 4, 3, padding=1)
    sets = [(torch.randn(3, 8, 9),), (torch.randn(3, 6, 5),)]
    check_export(model, sets, dynamic_shapes=({1: "h", 2: "w"},))


def test_conv_functional_weight_input():
    fn = OpModule(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1))
    w, b = torch.randn(4, 3, 3, 3), torch.randn(4)
    sets = [(x, w, b) for (x,) in _x2()]
    check_export(fn, sets, dynamic_shapes=(DS2[0], None, None))


CONV_T = {
    "default": dict(),
    "stride": dict(stride=2),
    "stride_pad_outpad": dict(stride=2, padding=1, output_padding=1),
    "groups_dilation": dict(groups=3, dilation=2, padding=1, bias=False),
    "rect": dict(stride=(2, 3), padding=(1, 0), output_padding=(0, 2)),
}


@pytest.mark.parametrize("name", sorted(CONV_T))
def test_conv_transpose2d(name):
    model = torch.nn.ConvTranspose2d(3, 6, 3, **CONV_T[name])
    check_export(model, _x2(), dynamic_shapes=DS2)
    if name == "stride_pad_outpad":  # aten.convolution.default, transposed=True
        check_export(model, _x2(), dynamic_shapes=DS2, export_options=DECOMPOSE)


def test_conv_transpose1d_3d():
    model = torch.nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1, output_padding=1)
    check_export(model, _x1(), dynamic_shapes=DS1)
    model = torch.nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1)
    check_export(model, _x3(), dynamic_shapes=DS3)


def test_convolution_aten_direct():
    w, b = torch.randn(4, 3, 3, 3), torch.randn(4)

    def fn(x):
        y = torch.ops.aten._convolution(
            x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, False, False, True, True
        )
        return y + torch.ops.aten.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)

    check_export(OpModule(fn), _x2(), dynamic_shapes=DS2)


# pooling

POOL2D = {
    "max": lambda x: F.max_pool2d(x, 2),
    "max_stride_pad": lambda x: F.max_pool2d(x, 3, 2, 1),
    "max_dilation": lambda x: F.max_pool2d(x, 2, 1, 0, dilation=2),
    "max_ceil": lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "max_indices": lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
    "max_indices_ceil": lambda x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True, return_indices=True),
    "avg": lambda x: F.avg_pool2d(x, 2),
    "avg_pad": lambda x: F.avg_pool2d(x, 3, 2, 1),
    "avg_pad_exclude": lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "avg_ceil": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
    "avg_ceil_exclude": lambda x: F.avg_pool2d(x, 2, 3, 1, ceil_mode=True, count_include_pad=False),
    "avg_divisor": lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=2),
    "adaptive_1": lambda x: F.adaptive_avg_pool2d(x, 1),
    "adaptive_uneven": lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
    "adaptive_max": lambda x: F.adaptive_max_pool2d(x, 1),
    "adaptive_max_indices": lambda x: F.adaptive_max_pool2d(x, 1, return_indices=True),
}


@pytest.mark.parametrize("name", sorted(POOL2D))
@pytest.mark.parametrize("dynamic", [False, True])
def test_pool2d(name, dynamic):
    fn = OpModule(POOL2D[name])
    if dynamic:
        check_export(fn, _x2(), dynamic_shapes=DS2)
    else:
        check_export(fn, _x2()[:1])
        check_export(fn, _x2()[1:])


@pytest.mark.parametrize("name", ["max", "max_indices", "avg_pad", "adaptive_1"])
def test_pool2d_decomposed_and_float16(name):
    fn = OpModule(POOL2D[name])
    check_export(fn, _x2(), dynamic_shapes=DS2, export_options=DECOMPOSE)
    check_export(fn, _x2(dtype=torch.float16), dynamic_shapes=DS2, **_tol(torch.float16))


def test_adaptive_avg_pool2d_divisible_static():
    fn = OpModule(lambda x: F.adaptive_avg_pool2d(x, (4, 3)) + 0)
    sets = [(torch.randn(2, 3, 8, 9),), (torch.randn(4, 3, 8, 9),)]
    onx = check_export(fn, sets, dynamic_shapes=({0: "batch"},))
    assert "AveragePool" in [n.op_type for n in onx.graph.node]


def test_adaptive_max_pool_divisible_static():
    fn = OpModule(lambda x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True))
    sets = [(torch.randn(2, 3, 8, 9),), (torch.randn(4, 3, 8, 9),)]
    check_export(fn, sets, dynamic_shapes=({0: "batch"},))
    fn = OpModule(lambda x: F.adaptive_max_pool1d(x, 1, return_indices=True))
    check_export(fn, _x1(), dynamic_shapes=DS1)


@pytest.mark.parametrize("out", [(3, 4), (5, 2), (8, 1)])
def test_adaptive_max_pool2d_uneven(out):
    # windows [floor(i * n / o), ceil((i + 1) * n / o)) overlap: values and indices
    fn = OpModule(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True))
    check_export(fn, _x2(), dynamic_shapes=DS2)
    check_export(fn, _x2(dtype=torch.float16), dynamic_shapes=DS2, **_tol(torch.float16))


def test_adaptive_max_pool_uneven_1d_3d_unbatched():
    fn = OpModule(lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True))
    check_export(fn, [(torch.randn(2, 3, 10),), (torch.randn(3, 3, 7),)], dynamic_shapes=DS1)
    fn = OpModule(lambda x: F.adaptive_max_pool1d(x, 3, return_indices=True))
    check_export(fn, [(torch.randn(3, 10),), (torch.randn(3, 7),)], dynamic_shapes=({1: "n"},))
    fn = OpModule(lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True))
    check_export(fn, _x3(), dynamic_shapes=DS3)
    # static sizes: the window indices are constants
    fn = OpModule(lambda x: F.adaptive_max_pool2d(x, (3, 3), return_indices=True))
    sets = [(torch.randn(2, 3, 8, 9),), (torch.randn(4, 3, 8, 9),)]
    check_export(fn, sets, dynamic_shapes=({0: "batch"},))


@pytest.mark.parametrize("out", [(3, 2), (6, 6), (2, 1)])
def test_adaptive_avg_pool2d_dynamic_uneven(out):
    # windows [floor(i * n / o), ceil((i + 1) * n / o)) computed in the graph from the
    # dynamic sizes (BEiT's pyramid pooling: outputs 1, 2, 3, 6 of height // 16)
    fn = OpModule(lambda x: F.adaptive_avg_pool2d(x, out))
    sets = [(torch.randn(2, 3, 7, 9),), (torch.randn(3, 3, 12, 5),), (torch.randn(1, 3, 2, 4),)]
    ds = ({0: "batch", 2: "height", 3: "width"},)
    onx = check_export(fn, sets, dynamic_shapes=ds)
    assert any(n.op_type == "Range" for n in onx.graph.node)  # not a constant matrix
    f16 = [(t.to(torch.float16),) for (t,) in sets]
    check_export(fn, f16, dynamic_shapes=ds, **_tol(torch.float16))


def test_adaptive_avg_pool_dynamic_1d_3d():
    fn = OpModule(lambda x: F.adaptive_avg_pool1d(x, 4))
    check_export(fn, [(torch.randn(2, 3, 10),), (torch.randn(3, 3, 7),)], dynamic_shapes=DS1)
    fn = OpModule(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)))
    check_export(fn, _x3(), dynamic_shapes=DS3)


def test_adaptive_avg_pool_1d_3d():
    fn = OpModule(lambda x: F.adaptive_avg_pool1d(x, 4))
    check_export(
        fn, [(torch.randn(2, 3, 10),), (torch.randn(4, 3, 10),)], dynamic_shapes=({0: "batch"},)
    )
    fn = OpModule(lambda x: F.adaptive_avg_pool3d(x, (1, 2, 3)))
    check_export(
        fn,
        [(torch.randn(2, 3, 4, 5, 7),), (torch.randn(4, 3, 6, 5, 7),)],
        dynamic_shapes=({0: "batch", 2: "d"},),
    )


def test_adaptive_avg_pool3d_uneven_empty_batch():
    # onnxruntime's MatMul fails to broadcast an empty batch: 2-D products
    fn = OpModule(lambda x: F.adaptive_avg_pool3d(x, (5, 7, 4)))
    check_export(
        fn,
        [(torch.randn(2, 3, 8, 8, 8),), (torch.randn(0, 3, 8, 8, 8),)],
        dynamic_shapes=({0: "batch"},),
    )
    check_export(
        fn, [(torch.randn(3, 8, 8, 8),), (torch.randn(2, 8, 8, 8),)], dynamic_shapes=({0: "c"},)
    )


def test_pool_1d_3d_and_unbatched():
    # torch.export specializes the length of 1-D pooling: dynamic batch only
    fn = OpModule(lambda x: (F.max_pool1d(x, 3, 2, 1), F.avg_pool1d(x, 3, 2, 1)))
    sets = [(torch.randn(2, 3, 9),), (torch.randn(4, 3, 9),)]
    check_export(fn, sets, dynamic_shapes=({0: "batch"},))
    fn = OpModule(lambda x: (F.max_pool3d(x, 2), F.avg_pool3d(x, 2, ceil_mode=True)))
    check_export(fn, _x3(), dynamic_shapes=DS3)
    fn = OpModule(lambda x: F.max_pool2d(x, 2) + F.avg_pool2d(x, 2))
    sets = [(torch.randn(3, 8, 9),), (torch.randn(3, 6, 5),)]
    check_export(fn, sets, dynamic_shapes=({1: "h", 2: "w"},))


def test_max_pool3d_with_indices():
    fn = OpModule(lambda x: F.max_pool3d(x, 2, return_indices=True))
    check_export(fn, _x3(), dynamic_shapes=DS3)


AVG_CEIL = {
    # (kernel, stride, padding, count_include_pad, divisor_override)
    "divisor": (2, 2, 0, True, 3),
    "divisor_pad": (3, 2, 1, True, 2),
    "divisor_exclude": ((3, 2), (2, 3), (1, 1), False, 5),
    "include_pad": (3, 2, 1, True, None),
    "include_pad_rect": ((2, 3), (3, 2), (1, 1), True, None),
    "exclude_pad": ((4, 3), 3, (2, 1), False, None),
    "stride_gt_kernel": (2, 3, 1, True, None),
}


@pytest.mark.parametrize("name", sorted(AVG_CEIL))
def test_avg_pool2d_ceil_mode(name):
    # torch drops the windows starting in the right padding, its divisor counts the left
    # and right padding but not what ceil_mode adds past it
    k, s, p, include, div = AVG_CEIL[name]
    fn = OpModule(
        lambda x: F.avg_pool2d(
            x, k, s, p, ceil_mode=True, count_include_pad=include, divisor_override=div
        )
    )
    check_export(fn, _x2(), dynamic_shapes=DS2)
    check_export(fn, _x2()[:1])
    check_export(fn, _x2()[1:])


def test_avg_pool2d_divisor_float16():
    fn = OpModule(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=2))
    check_export(fn, _x2(dtype=torch.float16), dynamic_shapes=DS2, **_tol(torch.float16))


def test_avg_pool_ceil_1d_3d():
    fn = OpModule(
        lambda x: (
            F.avg_pool1d(x, 4, 3, 2, ceil_mode=True, count_include_pad=False),
            F.avg_pool1d(x, 3, 2, 1, ceil_mode=True),
        )
    )
    check_export(
        fn, [(torch.randn(2, 3, 10),), (torch.randn(3, 3, 10),)], dynamic_shapes=({0: "batch"},)
    )
    fn = OpModule(
        lambda x: (
            F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, divisor_override=3),
            F.avg_pool3d(x, (3, 2, 2), 2, 1, ceil_mode=True),
        )
    )
    check_export(
        fn, [(torch.randn(2, 3, 5, 7, 6),), (torch.randn(1, 3, 4, 5, 9),)], dynamic_shapes=DS3
    )


# padding

PADS = {
    "constant": lambda x: F.pad(x, (1, 2)),
    "constant_value": lambda x: F.pad(x, (1, 2, 0, 3), value=-1.5),
    "constant_negative": lambda x: F.pad(x, (-1, 2, 1, -2)),
    "reflect": lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"),
    "replicate": lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"),
    "replicate_negative": lambda x: F.pad(x, (-2, 3, 1, -2), mode="replicate"),
    "replicate_cropped_out": lambda x: F.pad(x, (-5, 2, 0, 0), mode="replicate"),
    "circular": lambda x: F.pad(x, (2, 1, 1, 0), mode="circular"),
    "zero_pad2d": lambda x: torch.nn.functional.pad(x, (0, 0, 1, 1)),
}


@pytest.mark.parametrize("name", sorted(PADS))
@pytest.mark.parametrize("decompose", [False, True])
def test_pad(name, decompose):
    if (
        decompose
        and name == "circular"
        and find_converter(torch.ops.aten.slice_scatter.default, 18) is None
    ):
        pytest.skip("decomposed circular pad needs slice_scatter (indexing family)")
    check_export(
        OpModule(PADS[name]),
        _x2(),
        dynamic_shapes=DS2,
        export_options=DECOMPOSE if decompose else None,
    )


def test_pad_int64_and_1d_reflect():
    sets = [(torch.randint(-5, 5, s),) for s in [(2, 3, 5), (3, 4, 7)]]
    fn = OpModule(lambda x: F.pad(x, (1, 2), value=7) + F.pad(x, (2, 1), mode="replicate"))
    check_export(fn, sets, dynamic_shapes=({0: "batch", 1: "c", 2: "n"},))


@pytest.mark.parametrize("pad", [(8, -1, -1, -3), (-2, -1, -1, -3), (5, -4, -4, 3)])
def test_pad_replicate_negative_static(pad):
    # negative pads crop; output index i reads input index clip(i - left, 0, n - 1)
    fn = OpModule(lambda x: F.pad(x, pad, mode="replicate"))
    for shape in [(2, 3, 5, 5), (1, 2, 6, 7)]:
        check_export(fn, [(torch.randn(*shape),)])
        check_export(fn, [(torch.randint(-9, 9, shape),)])
    fn = OpModule(lambda x: torch.ops.aten.replication_pad2d(x, list(pad)))
    check_export(fn, [(torch.randn(2, 3, 5, 5),)])


def test_pad_dynamic_amount():
    fn = OpModule(lambda x, y: F.pad(x, (0, y.shape[0] - x.shape[-1])))
    sets = [(torch.randn(2, 3), torch.randn(5)), (torch.randn(4, 2), torch.randn(7))]
    check_export(fn, sets, dynamic_shapes=({0: "a", 1: "b"}, {0: "c"}))


@pytest.mark.parametrize("opset", [18, 19])
def test_pad_circular_opsets(opset):
    fn = OpModule(lambda x: F.pad(x, (1, 2), mode="circular"))
    check_export(fn, _x1(), dynamic_shapes=DS1, target_opset=opset)
    # negative pads crop first, the wrap-around reads the cropped tensor
    fn = OpModule(lambda x: F.pad(x, (-1, 2, 3, -2), mode="circular"))
    check_export(fn, _x2(), dynamic_shapes=DS2, target_opset=opset)


# upsampling

UPSAMPLE = {
    "nearest_scale": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    "nearest_size": lambda x: F.interpolate(x, size=(5, 13), mode="nearest"),
    "nearest_exact": lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
    "bilinear": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "bilinear_size": lambda x: F.interpolate(x, size=(5, 13), mode="bilinear"),
    "bilinear_align": lambda x: F.interpolate(x, size=(5, 13), mode="bilinear", align_corners=True),
    "bilinear_down": lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear"),
    "bicubic": lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
    "bicubic_align": lambda x: F.interpolate(x, size=(5, 13), mode="bicubic", align_corners=True),
    "upsample_module": torch.nn.Upsample(scale_factor=2),
}


@pytest.mark.parametrize("name", sorted(UPSAMPLE))
def test_upsample(name):
    check_export(OpModule(UPSAMPLE[name]), _x2(), dynamic_shapes=DS2)


@pytest.mark.parametrize("name", ["nearest_size", "bilinear", "bicubic_align"])
def test_upsample_decomposed(name):
    check_export(OpModule(UPSAMPLE[name]), _x2(), dynamic_shapes=DS2, export_options=DECOMPOSE)


def test_upsample_1d_3d():
    fn = OpModule(
        lambda x: F.interpolate(x, scale_factor=2, mode="linear") + F.interpolate(x, scale_factor=2)
    )
    check_export(fn, _x1(), dynamic_shapes=DS1)
    fn = OpModule(
        lambda x: (
            F.interpolate(x, scale_factor=2, mode="trilinear") + F.interpolate(x, scale_factor=2)
        )
    )
    check_export(fn, _x3(), dynamic_shapes=DS3)


@pytest.mark.parametrize("static", [True, False])
def test_upsample_between_transposes_loads_in_onnxruntime(static):
    # channels last -> Resize -> channels last (VideoLLaMA 3's projector): onnxruntime's
    # transpose optimizer (default level) pushing the transposes through a Resize with an
    # axes attribute empties its sizes and refuses the model
    fn = OpModule(
        lambda x: F.interpolate(x.permute(0, 3, 1, 2), size=(4, 4), mode="bilinear").permute(
            0, 2, 3, 1
        )
    )
    sets = [(torch.randn(2, 6, 6, 8),), (torch.randn(3, 5, 7, 8),)]
    ds = None if static else ({0: "batch", 1: "h", 2: "w"},)
    check_export(fn, sets[:1] if static else sets, dynamic_shapes=ds)


def test_upsample_dynamic_size():
    fn = OpModule(lambda x, y: F.interpolate(x, size=y.shape[-2:], mode="bilinear"))
    sets = [(x, torch.randn(1, 1, 11, 12)) for (x,) in _x2()]
    check_export(fn, sets, dynamic_shapes=(DS2[0], {2: "h2", 3: "w2"}))


# embedding


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_embedding(dtype):
    model = torch.nn.Embedding(10, 4, padding_idx=0)
    sets = [
        (torch.randint(0, 10, (2, 3), dtype=dtype),),
        (torch.randint(0, 10, (4, 5), dtype=dtype),),
    ]
    check_export(model, sets, dynamic_shapes=({0: "batch", 1: "seq"},))


def test_embedding_float16_weight_input():
    fn = OpModule(lambda w, i: F.embedding(i, w))
    sets = [
        (torch.randn(10, 4).half(), torch.randint(0, 10, (3,))),
        (torch.randn(7, 4).half(), torch.randint(0, 7, (6,))),
    ]
    check_export(fn, sets, dynamic_shapes=({0: "v"}, {0: "n"}))


# antialiased bilinear upsampling: spatial sizes static, batch and channels dynamic

AA_DS = ({0: "batch", 1: "channels"},)
AA = {
    "down_size": lambda x: F.interpolate(x, size=(4, 5), mode="bilinear", antialias=True),
    "down_align": lambda x: F.interpolate(
        x, size=(3, 7), mode="bilinear", antialias=True, align_corners=True
    ),
    "down_scale": lambda x: F.interpolate(
        x, scale_factor=(0.4, 0.6), mode="bilinear", antialias=True
    ),
    "up_down": lambda x: F.interpolate(x, size=(23, 4), mode="bilinear", antialias=True),
    "to_one": lambda x: F.interpolate(x, size=(1, 1), mode="bilinear", antialias=True),
    "bicubic_down": lambda x: F.interpolate(x, size=(4, 5), mode="bicubic", antialias=True),
    "bicubic_align": lambda x: F.interpolate(
        x, size=(3, 7), mode="bicubic", antialias=True, align_corners=True
    ),
    "bicubic_scale": lambda x: F.interpolate(
        x, scale_factor=(0.4, 1.7), mode="bicubic", antialias=True
    ),
}


@pytest.mark.parametrize("name", sorted(AA))
@pytest.mark.parametrize("hw", [(10, 12), (7, 9)])
def test_upsample_bilinear_antialias(name, hw):
    inputs = [(torch.randn(2, 3, *hw),), (torch.randn(1, 5, *hw),)]
    check_export(OpModule(AA[name]), inputs, dynamic_shapes=AA_DS)


def test_upsample_bilinear_antialias_weights():
    """Downsampling by 2 averages pairs with weights 1/4, 3/4, 3/4, 1/4 (a triangle twice
    as wide as bilinear's), normalized at the borders."""
    from experimental_experiment.torch_interpreter.convert.aten.upsample_aa import aa_weights

    w = aa_weights(8, 4, False)
    assert w.shape == (4, 8)
    assert w.sum(axis=1).tolist() == pytest.approx([1.0] * 4)
    assert w[1, 1:5].tolist() == pytest.approx([0.125, 0.375, 0.375, 0.125])
    assert w[0, :3].tolist() == pytest.approx([3 / 7, 3 / 7, 1 / 7])
    # bicubic (a = -0.5) at scale 1: the identity
    assert aa_weights(5, 5, False, mode="cubic") == pytest.approx(np.eye(5))


@pytest.mark.parametrize("name", sorted(AA))
def test_upsample_antialias_dynamic_spatial(name):
    """Dynamic spatial sizes: the weights are computed in the graph (one export, two
    input sizes; a scale factor gives a dynamic output size too)."""
    inputs = [(torch.randn(2, 3, 10, 12),), (torch.randn(1, 3, 17, 8),)]
    check_export(OpModule(AA[name]), inputs, dynamic_shapes=({0: "b", 2: "h", 3: "w"},))


def test_upsample_antialias_dynamic_output_size():
    """The output size follows another input's dynamic shape."""
    fn = OpModule(lambda x, y: F.interpolate(x, size=y.shape[-2:], mode="bilinear", antialias=True))
    sets = [
        (torch.randn(1, 2, 12, 10), torch.randn(1, 1, 5, 4)),
        (torch.randn(1, 2, 9, 14), torch.randn(1, 1, 4, 11)),
    ]
    check_export(fn, sets, dynamic_shapes=({2: "h", 3: "w"}, {2: "h2", 3: "w2"}))


# 3-D grid sampling: composed below opset 20, ONNX GridSample from opset 20

GRID_DS = ({0: "batch", 1: "c", 2: "d", 3: "h", 4: "w"}, {0: "batch", 1: "od", 2: "oh", 3: "ow"})


def _grid_inputs():
    torch.manual_seed(0)
    return [
        (torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 4, 2, 3) * 2.6 - 1.3),
        (torch.randn(1, 2, 3, 7, 2), torch.rand(1, 2, 5, 4, 3) * 2.6 - 1.3),
    ]


@pytest.mark.parametrize("opset", [18, 20])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(mode, padding, align, opset):
    fn = OpModule(
        lambda x, grid: F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    )
    onx = check_export(fn, _grid_inputs(), dynamic_shapes=GRID_DS, target_opset=opset)
    assert ("GridSample" in {n.op_type for n in onx.graph.node}) == (opset >= 20)


def test_grid_sample_3d_single_voxel_reflection():
    """A size-1 axis reflects every coordinate onto 0 (torch's special case)."""
    fn = OpModule(
        lambda x, grid: F.grid_sample(x, grid, padding_mode="reflection", align_corners=True)
    )
    check_export(fn, [(torch.randn(1, 2, 1, 3, 4), torch.rand(1, 2, 2, 2, 3) * 3 - 1.5)])


def test_grid_sample_3d_bicubic_unsupported():
    from experimental_experiment.torch_interpreter import UnsupportedOpError
    from experimental_experiment.torch_interpreter.convert.aten.grid_sample import (
        aten_grid_sampler_3d,
    )

    with pytest.raises(UnsupportedOpError, match="bilinear .0. and nearest .1."):
        aten_grid_sampler_3d(None, "x", "grid", 2, 0, False)


# average pooling with ceil_mode / divisor_override and adaptive max pooling, every
# dimension dynamic (the composed paths compute torch's sizes and divisors at runtime)

POOL_DYNAMIC = {
    "avg1d_ceil_pad": (lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), 1),
    "avg1d_ceil_exclude": (lambda x: F.avg_pool1d(x, 3, 2, 1, True, False), 1),
    "avg2d_ceil_divisor": (lambda x: F.avg_pool2d(x, 3, 2, 1, True, True, 5), 2),
    "avg2d_exclude_divisor": (lambda x: F.avg_pool2d(x, 2, 1, 1, False, False, 3), 2),
    "avg3d_ceil_exclude": (lambda x: F.avg_pool3d(x, 3, 2, 1, True, False), 3),
    "avg3d_ceil_divisor": (lambda x: F.avg_pool3d(x, 2, 2, 1, True, True, 7), 3),
    "adaptive_max1d": (lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), 1),
    "adaptive_max2d": (lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), 2),
}


@pytest.mark.parametrize("name", sorted(POOL_DYNAMIC))
def test_pooling_all_dims_dynamic(name):
    fn, spatial = POOL_DYNAMIC[name]
    first, second = [2, 3, 7, 9, 6][: 2 + spatial], [1, 4, 10, 5, 8][: 2 + spatial]
    ds = ({i: f"d{i}" for i in range(2 + spatial)},)
    check_export(OpModule(fn), [(torch.randn(*first),), (torch.randn(*second),)], dynamic_shapes=ds)
