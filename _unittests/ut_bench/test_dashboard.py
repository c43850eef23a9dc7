"""The dashboard renders the benchmark CSVs: 3 significant digits, pivots, headline, plots."""

import matplotlib
import pytest

from experimental_experiment.bench import dashboard

matplotlib.use("Agg")


def _write(path, text):
    path.write_text(text.strip() + "\n", encoding="utf-8")


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard, "bench_dir", lambda: str(tmp_path))
    _write(tmp_path / "export_time.csv", """
model,exporter,n_params,seconds,n_nodes,max_abs_diff,peak_rss_mb,error
m1,capture size-oblivious,10,2.0,,,100,
m1,to_onnx,10,2.2,50,1e-6,200,
m1,torch.onnx,10,8.8,60,1e-6,210,
m2,to_onnx,10,,,,,crash: boom
m2,torch.onnx,10,3.0,7,0,50,
""")
    _write(tmp_path / "llm_latency.csv", """
size,phase,seq,past,threads,exporter,latency_ms,vs_builder,vs_torch_onnx,error
small,decode,1,8,1,to_onnx default+onnxruntime,9.0,0.9,0.6,
small,decode,1,8,1,torch.onnx,15.0,1.5,1.0,
small,decode,1,8,1,builder,10.0,1.0,0.6667,
""")
    _write(tmp_path / "optim_speed_real.csv", """
model,variant,nodes,nodes_vs_torch_onnx,latency_ms,speed_vs_torch_onnx,speed_vs_eager,max_abs_diff,error
m1,to_onnx default,50,0.833,8.0,0.800,0.4,1e-6,
m1,torch.onnx,60,1.000,10.0,1.000,0.5,1e-6,
m2,to_onnx default,7,1.000,12.0,1.200,0.6,0,
m2,to_onnx default+ort,5,0.714,9.0,0.900,0.45,0,
m2,torch.onnx,7,1.000,10.0,1.000,0.5,0,
""")
    return tmp_path


@pytest.mark.parametrize("value,text", [(1234.5, "1234"), (12.345, "12.3"), (0.012345, "0.0123"),
                                        (1.0, "1.00"), ("", ""), (None, "")])
def test_sig3(value, text):
    assert dashboard.sig3(value) == text


def test_export_time_pivot_and_ratios(bench):
    rows = dashboard.read_rows("export_time.csv")
    text = dashboard.pivot_rst(rows, "model", "exporter", "seconds")
    assert "      - 2.20" in text and "failed" in text  # m2 to_onnx failed
    ratios = {r["model"]: r for r in dashboard.export_time_ratios(rows)}
    assert ratios["m1"]["vs_torch_onnx"] == pytest.approx(0.25)
    assert ratios["m1"]["vs_capture"] == pytest.approx(1.1)
    assert ratios["m2"]["vs_torch_onnx"] is None


def test_headline_reads_what_exists(bench):
    text = dashboard.headline()
    assert "0.25x torch.onnx's" in text  # median over the models with both times
    assert "0.90x to 0.90x" in text and "1.50x to 1.50x" in text
    assert "1.00x torch.onnx's" in text  # median of 0.8 and 1.2 (default optimization)
    assert "OpInfo" not in text  # no op_coverage.csv in this folder


def test_plots_draw_bars(bench):
    ax = dashboard.plot_export_time()
    assert len(ax.patches) == 2 * 3  # 2 models x 3 exporters
    ax = dashboard.plot_latency()
    assert [round(p.get_height(), 2) for p in ax.patches] == [0.9, 1.5]
    ax = dashboard.plot_speed_ratios()
    # 2 models x 2 variants (torch.onnx is the line at 1), m1 has no default+ort bar
    assert [round(p.get_height(), 2) for p in ax.patches] == [0.8, 1.2, 0, 0.9]


def test_plots_without_results(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard, "bench_dir", lambda: str(tmp_path))
    ax = dashboard.plot_export_time()
    assert "no benchmark result" in ax.texts[0].get_text()


def test_empty_table_is_a_sentence():
    assert dashboard.list_table(["a", "b"], []) == "*No benchmark result yet.*"
