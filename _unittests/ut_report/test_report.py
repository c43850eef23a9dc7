"""The export report's data model and writers (no torch needed)."""

import json
import os
import subprocess
import sys

import pytest

from experimental_experiment.report import (
    CaptureAttempt,
    DimensionRecord,
    ExportReport,
    SourceLocation,
)

SCHEMA = os.path.join(os.path.dirname(__file__), "data", "sarif-schema-2.1.0.json")


def _failed_report() -> ExportReport:
    loc = SourceLocation("/home/user/model.py", 12, "forward", "z = x.reshape(4, -1)")
    rep = ExportReport(
        model="M",
        status="failed",
        error_type="CaptureError",
        error="could not capture M",
        error_location=loc,
    )
    rep.capture_attempts.append(CaptureAttempt("strict=False", False, "UserError", "bad"))
    rep.dimensions.append(
        DimensionRecord("x.shape[0]", "specialized", "s0", value=4, guard="Eq(s0, 4)", location=loc)
    )
    rep.add("warning", "warning", "UserWarning: something", None)
    return rep


def test_json_round_trip():
    rep = _failed_report()
    back = ExportReport.from_dict(json.loads(rep.to_json()))
    assert back == rep
    assert back.dimensions[0].location.line == 12


def test_from_dict_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown fields"):
        ExportReport.from_dict({"nodes": 3})
    with pytest.raises(ValueError, match="JSON object"):
        ExportReport.from_dict([1, 2])
    with pytest.raises(ValueError, match="malformed"):
        ExportReport.from_dict({"capture_attempts": [{"what": 1}]})


def test_markdown_has_each_section():
    md = _failed_report().to_markdown()
    assert "**status**: failed" in md
    assert "| x.shape[0] | specialized to 4 | Eq(s0, 4) | /home/user/model.py:12" in md
    assert "## Capture attempts" in md and "UserError: bad" in md


def test_sarif_structure():
    sarif = _failed_report().to_sarif()
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["export-error"] == "error"
    assert levels["specialized-dimension"] == "warning"
    for res in run["results"]:
        assert rules[res["ruleIndex"]] == res["ruleId"]
        assert res["message"]["text"]
    dim = next(r for r in run["results"] if r["ruleId"] == "specialized-dimension")
    phys = dim["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"]["uri"] == "file:///home/user/model.py"
    assert phys["region"]["startLine"] == 12
    assert phys["region"]["snippet"]["text"] == "z = x.reshape(4, -1)"
    assert run["invocations"][0]["executionSuccessful"] is False


def test_sarif_valid_against_schema():
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema is not installed: the SARIF schema check needs it"
    )
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    for rep in [_failed_report(), ExportReport(model="M", status="success")]:
        jsonschema.validate(rep.to_sarif(), schema, cls=jsonschema.Draft4Validator)
    bad = _failed_report().to_sarif()
    bad["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema, cls=jsonschema.Draft4Validator)


@pytest.mark.parametrize("ext", ["json", "md", "sarif"])
def test_save_atomic_and_by_extension(tmp_path, ext):
    rep = _failed_report()
    path = tmp_path / f"report.{ext}"
    rep.save(str(path))
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    text = path.read_text(encoding="utf-8")
    if ext == "json":
        assert ExportReport.load(str(path)) == rep
    elif ext == "sarif":
        assert json.loads(text)["version"] == "2.1.0"
    else:
        assert text.startswith("# Export report: M")


def test_save_rejects_unknown_extension(tmp_path):
    with pytest.raises(ValueError, match=r"\.json, \.md or \.sarif"):
        _failed_report().save(str(tmp_path / "report.txt"))
    assert not list(tmp_path.iterdir())


def test_load_truncated_json(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(_failed_report().to_json()[:50])
    with pytest.raises(ValueError, match="not valid JSON"):
        ExportReport.load(str(path))


def test_no_torch_import():
    code = (
        "import sys, experimental_experiment.report as r; r.ExportReport().to_sarif(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
