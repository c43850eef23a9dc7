"""onnxruntime-genai packages of tiny decoders (random weights built from configurations):
the package loads in ``onnxruntime_genai.Model`` and greedy generation gives the tokens
of transformers' eager ``generate``; every wrong argument raises its typed error before
any file is written."""

import io
import json
import os

import onnx
import pytest
import torch

from experimental_experiment._command_lines import main
from experimental_experiment.genai import (
    GenAIPackageError,
    MissingTokenizerError,
    NotADecoderError,
    OutputFolderError,
    PackageModelTypeError,
    PackagePrecisionError,
    package_model,
)
from experimental_experiment.genai.generate import eager_greedy_sequence, greedy_sequence
from experimental_experiment.genai.io_names import rename_to_genai
from experimental_experiment.genai.progress import StepBar, progress_enabled
from experimental_experiment.torch_models.causal_lm import perturb_norm_weights
from experimental_experiment.torch_models.llm_helper import build_causal_lm, get_tiny_config

og = pytest.importorskip("onnxruntime_genai")

NEW_TOKENS = 16


def tiny_decoder(arch: str, seed: int = 0):
    """A tiny causal LM, normalization weights perturbed (no near-ties in the logits)."""
    config = get_tiny_config(arch)
    model = build_causal_lm(config, seed=seed)
    return perturb_norm_weights(model, seed + 1)


def eager_tokens(model, ids: torch.Tensor) -> list[int]:
    return eager_greedy_sequence(model, ids, NEW_TOKENS)


def genai_tokens(folder: str, ids: torch.Tensor) -> list[int]:
    return greedy_sequence(folder, ids[0].tolist(), NEW_TOKENS)


@pytest.fixture
def llama():
    return tiny_decoder("llama")


@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3"])
def test_genai_generates_eager_tokens(arch, tmp_path, quiet_transformers):
    model = tiny_decoder(arch)
    out = str(tmp_path / "pkg")
    report = package_model(model, out, progress=False)
    assert sorted(os.listdir(out)) == ["genai_config.json", "model.onnx", "model.onnx.data"]
    assert report.model_type == arch
    assert report.op_types.get("com.microsoft.GroupQueryAttention") == 2, report.op_types
    for length in (5, 11):
        ids = torch.randint(
            3, model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(length)
        )
        expected = eager_tokens(model, ids)
        assert len(expected) == length + NEW_TOKENS  # no end of sequence on the way
        assert genai_tokens(out, ids) == expected, (arch, length)


def test_genai_config_content(llama, tmp_path, quiet_transformers):
    out = str(tmp_path / "pkg")
    package_model(llama, out, progress=False, search=dict(max_length=64))
    with open(os.path.join(out, "genai_config.json")) as f:
        cfg = json.load(f)
    c = llama.config
    dec = cfg["model"]["decoder"]
    assert cfg["model"]["type"] == "llama"
    assert cfg["model"]["context_length"] == c.max_position_embeddings
    assert cfg["model"]["vocab_size"] == c.vocab_size
    assert (
        dec["num_attention_heads"],
        dec["num_key_value_heads"],
        dec["head_size"],
        dec["hidden_size"],
        dec["num_hidden_layers"],
    ) == (4, 2, 8, 32, 2)
    assert cfg["search"]["max_length"] == 64
    assert cfg["search"]["past_present_share_buffer"] is True
    onx = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False)
    names = [i.name for i in onx.graph.input] + [o.name for o in onx.graph.output]
    assert names == [
        "input_ids",
        "attention_mask",
        "position_ids",
        "past_key_values.0.key",
        "past_key_values.1.key",
        "past_key_values.0.value",
        "past_key_values.1.value",
        "logits",
        "present.0.key",
        "present.1.key",
        "present.0.value",
        "present.1.value",
    ]
    assert set(dec["inputs"]) == {
        "input_ids",
        "attention_mask",
        "position_ids",
        "past_key_names",
        "past_value_names",
    }


def test_gpt2_runs_as_llama(tmp_path, quiet_transformers):
    """genai's gpt2 type reads a combined cache: the package says llama."""
    model = tiny_decoder("gpt2")
    out = str(tmp_path / "pkg")
    assert package_model(model, out, progress=False).model_type == "llama"
    ids = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(5))
    assert genai_tokens(out, ids) == eager_tokens(model, ids)


def _bpe_tokenizer():
    """A byte-level BPE tokenizer trained on one sentence (genai's tokenizer reads it)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        ["hello world, the model generates tokens"] * 10,
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>"],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def test_cli_from_folder_with_tokenizer(llama, tmp_path, quiet_transformers, capsys):
    src = str(tmp_path / "hf")
    llama.save_pretrained(src)
    _bpe_tokenizer().save_pretrained(src)
    out = str(tmp_path / "pkg")
    assert main(["package", src, out, "--quiet"]) == 0
    assert "package: " in capsys.readouterr().out
    files = os.listdir(out)
    assert {"tokenizer.json", "tokenizer_config.json", "genai_config.json"} <= set(files)
    ids = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(5))
    assert genai_tokens(out, ids) == eager_tokens(llama, ids)


def test_tokenizer_object(llama, tmp_path, quiet_transformers):
    out = str(tmp_path / "pkg")
    tokenizer = _bpe_tokenizer()
    package_model(llama, out, tokenizer=tokenizer, progress=False)
    assert os.path.isfile(os.path.join(out, "tokenizer.json"))
    text = "hello world, the model"
    encoded = og.Tokenizer(og.Model(out)).encode(text)
    assert [int(t) for t in encoded] == tokenizer.encode(text, add_special_tokens=False)


def _assert_untouched(tmp_path, out):
    """No package and no temporary folder left."""
    assert not os.path.exists(out)
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_unsupported_precision(llama, tmp_path):
    out = str(tmp_path / "pkg")
    with pytest.raises(PackagePrecisionError, match="'int3'.*fp32"):
        package_model(llama, out, precision="int3")
    _assert_untouched(tmp_path, out)
    deep = tmp_path / "a" / "b" / "pkg"
    with pytest.raises(PackagePrecisionError):
        package_model(llama, str(deep), precision="int3")
    assert not (tmp_path / "a").exists()  # no parent folder created either


def test_not_a_decoder(tmp_path, quiet_transformers):
    import transformers

    bert = transformers.BertModel(get_tiny_config("bert")).eval()
    out = str(tmp_path / "pkg")
    with pytest.raises(NotADecoderError, match="BertModel cannot generate"):
        package_model(bert, out)
    t5 = transformers.T5ForConditionalGeneration(get_tiny_config("t5")).eval()
    with pytest.raises(NotADecoderError, match="encoder-decoder"):
        package_model(t5, out)
    with pytest.raises(NotADecoderError, match="no config.json"):
        package_model(str(tmp_path), out)
    with pytest.raises(NotADecoderError, match="not a transformers model"):
        package_model(torch.nn.Linear(2, 2), out)
    _assert_untouched(tmp_path, out)


def test_missing_tokenizer(llama, tmp_path):
    out = str(tmp_path / "pkg")
    with pytest.raises(MissingTokenizerError, match="does not exist"):
        package_model(llama, out, tokenizer=str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingTokenizerError, match="holds no tokenizer.json"):
        package_model(llama, out, tokenizer=str(tmp_path / "empty"))
    with pytest.raises(MissingTokenizerError, match="no tokenizer given"):
        package_model(llama, out, require_tokenizer=True)
    os.rmdir(tmp_path / "empty")
    _assert_untouched(tmp_path, out)


def test_out_dir_not_empty(llama, tmp_path):
    out = tmp_path / "pkg"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputFolderError, match="not empty"):
        package_model(llama, str(out))
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputFolderError, match="not a folder"):
        package_model(llama, str(tmp_path / "file"))
    assert os.listdir(out) == ["keep.txt"]


def test_overwrite_replaces_the_folder(llama, tmp_path, quiet_transformers):
    out = tmp_path / "pkg"
    out.mkdir()  # an empty folder is fine without overwrite
    package_model(llama, str(out), progress=False)
    (out / "old.txt").write_text("old")
    package_model(llama, str(out), overwrite=True, progress=False)
    assert "old.txt" not in os.listdir(out)
    assert "genai_config.json" in os.listdir(out)
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_unknown_model_type(llama, tmp_path):
    out = str(tmp_path / "pkg")
    with pytest.raises(PackageModelTypeError, match="'bloom'"):
        package_model(llama, out, model_type="bloom")
    _assert_untouched(tmp_path, out)


def test_failure_leaves_no_folder(llama, tmp_path, monkeypatch, quiet_transformers):
    from experimental_experiment.genai import package as package_module

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(package_module, "write_genai_config", fail)
    out = str(tmp_path / "pkg")
    with pytest.raises(OSError, match="disk full"):
        package_model(llama, out, progress=False)
    _assert_untouched(tmp_path, out)


def test_cli_errors_are_one_line(llama, tmp_path, capsys):
    src = str(tmp_path / "hf")
    llama.save_pretrained(src)
    out = str(tmp_path / "pkg")
    capsys.readouterr()  # save_pretrained's own progress bar
    assert main(["package", src, out, "--precision", "int3", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("package: precision 'int3'"), err
    assert main(["package", str(tmp_path), out, "--quiet"]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_errors_share_a_base():
    from experimental_experiment.errors import ExportError

    for cls in (
        MissingTokenizerError,
        NotADecoderError,
        OutputFolderError,
        PackageModelTypeError,
        PackagePrecisionError,
    ):
        assert issubclass(cls, GenAIPackageError) and issubclass(cls, ExportError)


def test_rename_unrecognized_cache():
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [1, 2])
    onx = helper.make_model(
        helper.make_graph([helper.make_node("Identity", ["input_ids"], ["y"])], "g", [x], [y])
    )
    with pytest.raises(NotADecoderError, match="no recognizable cache of 2 layers"):
        rename_to_genai(onx, 2)


def test_progress_bar(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not progress_enabled(True)
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    assert progress_enabled(True) and not progress_enabled(False)
    with StepBar(["export", "save"], enabled=True) as bar:
        with bar.step("export"):
            pass
        with bar.step("save"):
            pass
    text = tty.getvalue()
    assert "genai package: export" in text and "2/2" in text, text
    assert set(bar.durations) == {"export", "save"}


def test_int4_package_generates(llama, tmp_path, quiet_transformers):
    out = str(tmp_path / "pkg")
    report = package_model(llama, out, precision="int4", progress=False)
    assert report.op_types.get("com.microsoft.MatMulNBits", 0) > 0, report.op_types
    assert "quantize" in report.durations
    ids = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(5))
    expected, got = eager_tokens(llama, ids), genai_tokens(out, ids)
    assert len(got) == len(expected)
    # int4 weights: the first generated tokens only are expected to agree
    assert got[:4] == expected[:4], (got, expected)


def test_int4_quantizes_the_head(llama, tmp_path, quiet_transformers):
    # the head is the largest weight of a decoding step: a float32 head made int4
    # decoding slower than onnxruntime-genai's builder, which quantizes it
    report = package_model(llama, str(tmp_path / "q"), precision="int4", progress=False)
    assert "MatMul" not in report.op_types, report.op_types
    kept = package_model(
        llama, str(tmp_path / "f"), precision="int4", progress=False, quantize_lm_head=False
    )
    assert kept.op_types.get("MatMul") == 1, kept.op_types
    assert (
        kept.op_types["com.microsoft.MatMulNBits"]
        == report.op_types["com.microsoft.MatMulNBits"] - 1
    )


def test_int4_bad_block_size_before_work(llama, tmp_path):
    from experimental_experiment.quantize import QuantizeOptionError

    out = str(tmp_path / "pkg")
    with pytest.raises(QuantizeOptionError, match="block_size=12"):
        package_model(llama, out, precision="int4", block_size=12)
    _assert_untouched(tmp_path, out)


class _FakeLM(torch.nn.Module):
    """Returns a cache whose layers hold what ``layers`` says."""

    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def forward(self, input_ids, attention_mask=None, use_cache=True):
        from types import SimpleNamespace

        return SimpleNamespace(past_key_values=SimpleNamespace(layers=self.layers))


def test_probe_cache_refuses_other_caches():
    from types import SimpleNamespace

    from experimental_experiment.genai.export import probe_cache

    hybrid = _FakeLM([SimpleNamespace(conv_states=torch.zeros(1, 2, 3))])
    with pytest.raises(NotADecoderError, match="layer 0 .* state space or hybrid"):
        probe_cache(hybrid)
    # keys and values of other sizes (a latent attention), layers of other geometries:
    # the package pads them to one geometry (test_cache_geometry.py)
    latent = _FakeLM(
        [SimpleNamespace(keys=torch.zeros(1, 2, 2, 8), values=torch.zeros(1, 2, 2, 4))]
    )
    assert probe_cache(latent) == [((2, 8), (2, 4), 0)]
    mixed = _FakeLM(
        [
            SimpleNamespace(keys=torch.zeros(1, 2, 2, 8), values=torch.zeros(1, 2, 2, 8)),
            SimpleNamespace(keys=torch.zeros(1, 1, 2, 8), values=torch.zeros(1, 1, 2, 8)),
        ]
    )
    assert probe_cache(mixed) == [((2, 8), (2, 8), 0), ((1, 8), (1, 8), 0)]
    good = _FakeLM(
        [SimpleNamespace(keys=torch.zeros(1, 2, 2, 8), values=torch.zeros(1, 2, 2, 8))] * 3
    )
    assert probe_cache(good) == [((2, 8), (2, 8), 0)] * 3
    both = _FakeLM(
        [
            SimpleNamespace(
                keys=torch.zeros(1, 2, 2, 8),
                values=torch.zeros(1, 2, 2, 8),
                conv_states={0: torch.zeros(1, 4, 3)},
            )
        ]
    )
    with pytest.raises(NotADecoderError, match="conv_states besides its keys and values"):
        probe_cache(both)
    compressed = _FakeLM(
        [
            SimpleNamespace(
                keys=torch.zeros(1, 1, 2, 8),
                values=torch.zeros(1, 1, 2, 8),
                compressed_kv={0: torch.zeros(1, 1, 8)},
                buffer_kv={},  # empty: not a state
                _sliding_window_tensor=torch.tensor(4),
            )
        ]
    )
    with pytest.raises(NotADecoderError, match="holds compressed_kv besides"):
        probe_cache(compressed)

    class Failing(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, use_cache=True):
            raise AttributeError("no attribute 'num_hidden_layers'")

    with pytest.raises(NotADecoderError, match="fails in eager with use_cache=True"):
        probe_cache(Failing())
    # 32 virtual prompt tokens prepended to the cache (CPM-Ant): genai cannot run it
    prompted = _FakeLM(
        [SimpleNamespace(keys=torch.zeros(1, 2, 34, 8), values=torch.zeros(1, 2, 34, 8))]
    )
    with pytest.raises(NotADecoderError, match="caches 34 positions for 2 tokens"):
        probe_cache(prompted)


def test_configuration_without_cache(tmp_path, quiet_transformers):
    """use_cache=False in the configuration (qwen2 then returns no cache): the package
    still returns the cache."""
    model = tiny_decoder("qwen2")
    model.config.use_cache = False
    out = str(tmp_path / "pkg")
    package_model(model, out, progress=False)
    assert model.config.use_cache is False  # restored
    ids = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(5))
    assert genai_tokens(out, ids) == eager_tokens(model, ids)


def test_no_cache_because_not_a_decoder(tmp_path, quiet_transformers):
    import transformers

    config = transformers.BertGenerationConfig(
        vocab_size=1000,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        is_decoder=False,
    )
    model = transformers.BertGenerationDecoder(config).eval()
    with pytest.raises(NotADecoderError, match="is_decoder=False"):
        package_model(model, str(tmp_path / "pkg"), progress=False)


def test_falcon_multi_query(tmp_path, quiet_transformers):
    """One key/value head read from the cache the model returns, not the config."""
    import transformers

    config = transformers.FalconConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=1000,
        multi_query=True,
        new_decoder_architecture=False,
        max_position_embeddings=128,
    )
    model = transformers.FalconForCausalLM(config).eval()
    out = str(tmp_path / "pkg")
    report = package_model(model, out, progress=False)
    assert report.model_type == "llama"
    with open(os.path.join(out, "genai_config.json")) as f:
        assert json.load(f)["model"]["decoder"]["num_key_value_heads"] == 1
    ids = torch.randint(3, 1000, (1, 5), generator=torch.Generator().manual_seed(5))
    assert genai_tokens(out, ids) == eager_tokens(model, ids)


def test_package_shows_the_export_and_quantization_bars(llama, tmp_path, monkeypatch):
    """progress=True on a terminal: the package's steps, and below them the bars of the
    export (FX nodes) and of the int4 quantization (MatMulNBits nodes)."""
    from experimental_experiment.ext_test_case import fake_terminal

    tty = fake_terminal(monkeypatch)
    package_model(llama, str(tmp_path / "pkg"), precision="int4", progress=True)
    text = tty.getvalue()
    for expected in [
        "genai package: export and optimize",
        "genai package: quantize",
        "to_onnx: convert",
        "quantize int4: quantize",
        "MatMulNBits",
    ]:
        assert expected in text, (expected, text[-2000:])
