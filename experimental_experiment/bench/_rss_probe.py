"""Peak resident memory of one runner, measured in a fresh process started by
:mod:`experimental_experiment.bench.llm_precision` (run as a script, it imports neither
torch nor this package, so only the runtime and the model count).

.. code-block:: bash

    python experimental_experiment/bench/_rss_probe.py genai PACKAGE_FOLDER 1 512

It loads the model, runs a prefill of ``SEQ`` tokens then one decoding step, and prints
the peak resident set size in MiB (``VmHWM``).
"""

import json
import resource
import sys

import numpy as np


def _genai(folder: str, threads: int, seq: int) -> None:
    import onnxruntime_genai as og

    cfg = og.Config(folder)
    cfg.overlay(
        json.dumps(
            {
                "model": {
                    "decoder": {
                        "session_options": {
                            "intra_op_num_threads": threads,
                            "inter_op_num_threads": 1,
                        }
                    }
                }
            }
        )
    )
    model = og.Model(cfg)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=seq + 4)
    gen = og.Generator(model, params)
    gen.append_tokens(np.arange(seq, dtype=np.int32) % 100 + 3)
    gen.generate_next_token()


def _ort(folder: str, threads: int, seq: int) -> None:
    import os

    import onnxruntime

    with open(os.path.join(folder, "genai_config.json")) as f:
        dec = json.load(f)["model"]["decoder"]
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = onnxruntime.InferenceSession(
        os.path.join(folder, dec["filename"]), opts, providers=["CPUExecutionProvider"]
    )
    shape = (1, dec["num_key_value_heads"], 0, dec["head_size"])
    feeds = {}
    for i in sess.get_inputs():
        if i.name.startswith("past_key_values."):
            feeds[i.name] = np.zeros(shape, dtype=np.float32)
        elif i.name == "input_ids":
            feeds[i.name] = (np.arange(seq, dtype=np.int64) % 100 + 3)[None]
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, seq), dtype=np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(seq, dtype=np.int64)[None]
        else:
            raise ValueError(f"unexpected input {i.name!r} in {folder!r}")
    sess.run(None, feeds)


def _vm_hwm_mb() -> float:
    """Peak resident memory of this process since it started (``VmHWM``; unlike
    ``ru_maxrss`` it does not keep the parent's peak across ``exec``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> int:
    runtime, folder, threads, seq = argv[0], argv[1], int(argv[2]), int(argv[3])
    (_genai if runtime == "genai" else _ort)(folder, threads, seq)
    print(_vm_hwm_mb())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
