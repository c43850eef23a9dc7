"""The dashboard renders the benchmark CSVs: 3 significant digits, pivots, headline, plots."""

import matplotlib
import pytest

from experimental_experiment.bench import (
    dashboard,
    dashboard_pages,
    dashboard_plots,
    report_format,
)

matplotlib.use("Agg")


def _write(path, text):
    path.write_text(text.strip() + "\n", encoding="utf-8")


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard, "bench_dir", lambda: str(tmp_path))
    _write(
        tmp_path / "export_time.csv",
        """
model,exporter,n_params,seconds,n_nodes,max_abs_diff,peak_rss_mb,error
m1,capture size-oblivious,10,2.0,,,100,
m1,to_onnx,10,2.2,50,1e-6,200,
m1,torch.onnx,10,8.8,60,1e-6,210,
m2,to_onnx,10,,,,,crash: boom
m2,torch.onnx,10,3.0,7,0,50,
""",
    )
    _write(
        tmp_path / "llm_latency.csv",
        """
size,phase,seq,past,threads,exporter,latency_ms,vs_builder,vs_torch_onnx,error
small,decode,1,8,1,to_onnx default+onnxruntime,9.0,0.9,0.6,
small,decode,1,8,1,torch.onnx,15.0,1.5,1.0,
small,decode,1,8,1,builder,10.0,1.0,0.6667,
""",
    )
    _write(
        tmp_path / "optim_speed_real.csv",
        """
model,variant,nodes,nodes_vs_torch_onnx,latency_ms,speed_vs_torch_onnx,speed_vs_eager,max_abs_diff,error
m1,to_onnx default,50,0.833,8.0,0.800,0.4,1e-6,
m1,torch.onnx,60,1.000,10.0,1.000,0.5,1e-6,
m2,to_onnx default,7,1.000,12.0,1.200,0.6,0,
m2,to_onnx default+ort,5,0.714,9.0,0.900,0.45,0,
m2,torch.onnx,7,1.000,10.0,1.000,0.5,0,
""",
    )
    return tmp_path


@pytest.mark.parametrize(
    "value,text",
    [
        (1234.5, "1230"),
        (12.345, "12.3"),
        (0.012345, "0.0123"),
        (1.0, "1.00"),
        ("", ""),
        (None, ""),
        ("8.940696716308594e-08", "8.94e-08"),
        (-2.5e-6, "-2.50e-06"),
        (9.996, "10.0"),
        (0.0009996, "0.00100"),
        (float("nan"), "NaN"),
        ("nan", "NaN"),
        (float("inf"), "inf"),
        (0.0, "0"),
        ("238", "238"),
        (43862016, "43,862,016"),
        (123456.0, "1.23e+05"),
        ("pass", "pass"),
    ],
)
def test_fmt(value, text):
    assert report_format.fmt(value) == text


def test_sig3_is_deprecated():
    with pytest.warns(DeprecationWarning, match=r"dashboard\.sig3 is deprecated.*0\.3; use .*fmt"):
        sig3 = dashboard.sig3
    assert sig3 is report_format.fmt and sig3(123456.0) == report_format.fmt(123456.0)
    with pytest.raises(AttributeError, match="no_such_name"):
        dashboard.no_such_name  # noqa: B018


def test_export_time_pivot_and_ratios(bench):
    rows = dashboard.read_rows("export_time.csv")
    text = dashboard.pivot_rst(rows, "model", "exporter", "seconds")
    assert "      - 2.20" in text and "failed" in text  # m2 to_onnx failed
    # to_onnx first, the other exporters in the order of the file
    assert "    * - model\n      - to_onnx\n      - capture size-oblivious\n" in text
    ratios = {r["model"]: r for r in dashboard.export_time_ratios(rows)}
    assert ratios["m1"]["vs_torch_onnx"] == pytest.approx(0.25)
    assert ratios["m1"]["vs_capture"] == pytest.approx(1.1)
    assert ratios["m2"]["vs_torch_onnx"] is None


def test_headline_reads_what_exists(bench):
    text = dashboard.headline()
    rows = text.split("    * - ")[2:]
    export, latency, llm = rows
    # median over the models with both times, torch.onnx the reference, lower is better
    assert "lower is better" in export
    assert "- 0.25x\n      - 1x\n      - torch.onnx.export" in export
    assert "- 1.00x\n      - 1x\n" in latency  # median of 0.8 and 1.2 (default optimization)
    # the builder is the reference of the LLM row, in the reference column
    assert "- 0.90x to 0.90x\n      - 1.50x to 1.50x\n" in llm
    assert "- 1x: onnxruntime-genai's model builder" in llm
    assert "OpInfo" not in text  # no op_coverage.csv in this folder
    # every row cites its run: no git history in tmp_path, versions from README.rst
    assert all(
        "onnxruntime" in r.split("\n")[-1] or "onnxruntime" in r.split("\n")[-2] for r in rows
    )


def test_plots_draw_bars(bench):
    ax = dashboard_plots.plot_export_time()
    assert len(ax.patches) == 2 * 3  # 2 models x 3 exporters
    ax = dashboard_plots.plot_latency()
    assert [round(p.get_height(), 2) for p in ax.patches] == [0.9, 1.5]
    ax = dashboard_plots.plot_speed_ratios()
    # 2 models x 2 variants (torch.onnx is the line at 1), m1 has no default+ort bar
    assert [round(p.get_height(), 2) for p in ax.patches] == [0.8, 1.2, 0, 0.9]


def test_plots_without_results(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard, "bench_dir", lambda: str(tmp_path))
    ax = dashboard_plots.plot_export_time()
    assert "no benchmark result" in ax.texts[0].get_text()


def test_empty_table_is_a_sentence():
    assert dashboard.list_table(["a", "b"], []) == "*No benchmark result yet.*"


def test_pivot_table_puts_exporters_side_by_side():
    rows = [
        dict(model="m", exporter="torch.onnx", seconds="2.0", nodes="7", error=""),
        dict(model="m", exporter="to_onnx", seconds="1.23456", nodes="5", error=""),
        dict(model="n", exporter="to_onnx", seconds="", nodes="", error="boom"),
    ]
    text = dashboard.pivot_table(
        rows,
        ["model"],
        "exporter",
        [("seconds", "(s)", report_format.fmt), ("nodes", "nodes", str)],
    )
    header, m, n = text.split("    * - ")[1:]
    assert header.split("\n      - ") == [
        "model",
        "to_onnx (s)",
        "to_onnx nodes",
        "torch.onnx (s)",
        "torch.onnx nodes\n",
    ]
    assert m.split("\n      - ") == ["m", "1.23", "5", "2.00", "7\n"]
    assert n.startswith("n\n      - failed\n      - failed\n")


def test_failures_view_keeps_the_other_exporter():
    rows = [
        dict(op="a", exporter="to_onnx", status="pass"),
        dict(op="a", exporter="torch.onnx", status="export-fail"),
        dict(op="b", exporter="to_onnx", status="pass"),
        dict(op="b", exporter="torch.onnx", status="skipped"),
    ]
    assert dashboard.failures(rows) == [rows[1]]
    assert dashboard.failing_keys(rows, "op") == rows[:2]
    counts = dashboard.status_counts(rows)
    assert "    * - export-fail\n      - 0\n      - 1" in counts
    assert "    * - total\n      - 2\n      - 2" in counts


def test_op_coverage_failures_keep_full_detail(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard, "bench_dir", lambda: str(tmp_path))
    detail = (
        "ConversionError <- DispatchError: No ONNX function found for <OpOverload("
        "op='aten.masked_select', overload='default')>. Failure message: No "
        "decompositions registered for the real-valued input 123"
    )
    _write(
        tmp_path / "op_coverage.csv",
        f"""
op,exporter,status,samples,passed,detail
abs,to_onnx,pass,1,1,
abs,torch.onnx,pass,1,1,
combinations,to_onnx,pass,2,2,
combinations,torch.onnx,export-fail,2,0,"{detail}"
""",
    )
    text = dashboard_pages.op_coverage_failures()
    assert "1 operators fail" in text and "abs" not in text
    assert "aten.masked/_select', overload='default')>. Failure message: No " not in text
    assert (
        "op='aten.masked\\_select', overload='default')>. Failure message: No "
        "decompositions registered for the real-valued input 123" in text
    )
    assert "<details>" in dashboard_pages.op_coverage_all()


def test_run_line_cites_date_commit_versions(bench):
    (bench / "x.csv").write_text("a,date,versions\n1,2026-01-02,torch 9\n", encoding="utf-8")
    assert dashboard.run_line("x.csv").startswith("Run of 2026-01-02 (torch 9)")
    (bench / "y.csv").write_text("a\n1\n", encoding="utf-8")
    (bench / "y.json").write_text(
        '{"date": "2026-03-04", "commit": "abcdef123456", '
        '"versions": {"onnxruntime": "1.2", "torch": "3.4"}}',
        encoding="utf-8",
    )
    assert dashboard.run_line("y.csv").startswith(
        "Run of 2026-03-04, commit ``abcdef1`` (torch 3.4, onnxruntime 1.2)"
    )
    # nothing in the file: versions of README.rst's tested set, and the page says so
    line = dashboard.run_line("export_time.csv")
    assert "onnxruntime" in line and "tested set in README.rst" in line


ZOO_CSV = """
model_type,head,model_class,exporter,cache,status,stage,cause,error,export_time,nodes,max_diff,wall_time
a,causal-lm,A,to_onnx,1,pass,,,,1.0,100,1e-06,2
a,causal-lm,A,torch.onnx,1,pass,,,,4.0,120,1e-06,5
a,causal-lm,A,transformers,1,pass,,,,6.0,130,1e-06,7
b,masked-lm,B,to_onnx,0,pass,,,,2.0,50,0,3
b,masked-lm,B,torch.onnx,0,fail,mismatch,numerical mismatch,AssertionError: max,3.0,60,,4
b,masked-lm,B,transformers,0,skip,refused,refused by the exporter,Refused: labels,,,,1
c,masked-lm,C,to_onnx,0,pass,,,,3.0,70,0,3
c,masked-lm,C,torch.onnx,0,fail,capture,data-dependent expression,UserError: x,,,,2
c,masked-lm,C,transformers,0,fail,capture,data-dependent expression,UserError: x,,,,2
d,masked-lm,D,to_onnx,0,fail,config,unknown model type,ValueError: d,,,,1
d,masked-lm,D,torch.onnx,0,fail,config,unknown model type,ValueError: d,,,,1
e,masked-lm,E,to_onnx,0,pass,,,,5.0,90,0,6
e,masked-lm,E,torch.onnx,0,pass,,,,5.5,95,0,6
"""


def test_headline_compares_three_exporters_on_the_zoo(bench):
    _write(bench / "zoo.csv", ZOO_CSV)
    text = dashboard.headline()
    assert "      - transformers' OnnxExporter (zoo only)\n" in text
    rows = text.split("    * - ")[2:]
    passed, same, seconds, nodes = rows[:4]
    # the cases each exporter ran: built (d fails at the config stage), not refused (b)
    assert "- 4 / 4\n      - 2 / 4\n      - 1 / 2 (1 refused)\n" in passed
    # on the model types all three ran: a and c
    assert same.startswith("the same on the 2 model types to_onnx, torch.onnx, transformers")
    assert "- 2 / 2\n      - 1 / 2\n      - 1 / 2\n" in same
    # medians over the cases each exporter exported (the check passed or not)
    assert "- 2.50 s (4 cases)\n      - 4.00 s (3 cases)\n      - 6.00 s (1 cases)\n" in seconds
    assert "- 80 (4 cases)\n      - 95 (3 cases)\n      - 130 (1 cases)\n" in nodes
    # the other benchmarks leave the transformers column empty
    export = next(r for r in rows if "export time at real sizes" in r)
    assert "- 0.25x\n      - 1x\n      -\n      - torch.onnx.export" in export


def test_headline_without_transformers_rows_keeps_two_exporters(bench):
    _write(
        bench / "zoo.csv",
        "\n".join(line for line in ZOO_CSV.strip().splitlines() if ",transformers," not in line),
    )
    text = dashboard.headline()
    assert "OnnxExporter" not in text
    rows = text.split("    * - ")[2:]
    assert "- 4 / 4\n      - 2 / 4\n      -\n      - " in rows[0]  # then reference, run
    assert not any(r.startswith("the same on") for r in rows)  # both ran a, b, c, e
    assert "- 2.50 s (4 cases)\n      - 4.00 s (3 cases)\n      -\n" in rows[1]


def test_headline_says_when_zoo_runs_differ(bench):
    import json

    _write(bench / "zoo.csv", ZOO_CSV)
    runs = {
        "to_onnx": {"date": "2026-11-26 05:48 UTC"},
        "transformers": {"date": "2026-11-28 00:46 UTC"},
    }
    (bench / "zoo.json").write_text(json.dumps({"runs": runs}), encoding="utf-8")
    assert "wall time of separate runs" in dashboard.headline()
    runs["transformers"] = runs["to_onnx"]
    (bench / "zoo.json").write_text(json.dumps({"runs": runs}), encoding="utf-8")
    assert "wall time of separate runs" not in dashboard.headline()


def test_precision_page_and_plot(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard, "bench_dir", lambda: str(tmp_path))
    _write(
        tmp_path / "llm_precision.csv",
        """
size,phase,seq,past,threads,precision,accuracy_level,exporter,runtime,latency_ms,vs_builder,peak_rss_mb,disk_mb,error
small,prefill,8,0,1,int4 acc4,4,ours,genai,9.0,0.9,300,20,
small,prefill,8,0,1,int4 acc4,4,ours,InferenceSession,12.0,1.2,310,20,
small,prefill,8,0,1,int4 acc4,4,builder,genai,10.0,1.0,290,21,
small,prefill,8,0,1,int4 acc4,4,builder,InferenceSession,10.0,1.0,295,21,
""",
    )
    _write(
        tmp_path / "quantized_models.csv",
        """
model,flow,exporter,status,latency_int8_ms,latency_fp32_ms
resnet,x86_static,to_onnx,ok,30,60
vit,xnnpack,to_onnx,failed,,
""",
    )
    ax = dashboard_plots.plot_precision_ratios()
    # one cell, one bar per precision and runtime of our package
    assert [round(p.get_height(), 2) for p in ax.patches] == [0.9, 1.2]
    text = dashboard_pages.llm_precision_tables()
    assert "0.900x" in text and "1.20x" in text and "ours genai" in text
    qdq = dashboard_pages.quantized_latency_table()
    assert "0.500x" in qdq and "vit" not in qdq


def test_headline_heads_and_multimodal_rows(bench):
    _write(
        bench / "zoo_heads.csv",
        """
model_type,head,model_class,exporter,cache,status,stage,cause,error,export_time,nodes,max_diff,wall_time
a,qa,A,to_onnx,,pass,,,,1,10,0,2
b,qa,B,to_onnx,,fail,export,capture,x,,,,2
c,qa,C,to_onnx,,fail,config,config,x,,,,2
d,km,D,to_onnx,,pass,,,,1,10,0,2
a,qa,A,torch.onnx,,fail,export,capture,x,,,,2
b,qa,B,torch.onnx,,fail,export,capture,x,,,,2
""",
    )
    _write(
        bench / "multimodal.csv",
        """
type,parts,equal_tokens,margin,max_abs_diff,export_time,status,reason
m1,vision+merge+decoder,8,1,1e-5,3,pass,
m2,vision+merge+decoder,3,1,1,3,mismatch,
m3,,0,,,,eager-fail,ImportError
""",
    )
    rows = dashboard.headline().split("    * - ")
    heads = next(r for r in rows if r.startswith("(model type, head) pairs"))
    # to_onnx over the built cases (c failed at the config stage), then both exporters
    # on the cases both ran (a and b)
    assert "- 66.7% (2 / 3); 1 / 2 on the cases both ran\n      - 0 / 2 on the cases" in heads
    multimodal = next(r for r in rows if r.startswith("multimodal models"))
    assert "- 50.0% (1 / 2)\n      - not run\n" in multimodal  # m3 never built
