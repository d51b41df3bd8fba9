"""test_examples.py — every example runs (CPU, 2 ranks under torchrun) and its own check of fco
against plain torch passes. Run: pytest tests/python/test_examples.py
"""
import os
import signal
import subprocess
import sys

import pytest

import fco

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("example", ["tp_mlp_decode.py", "dlrm_forward.py", "moe_layer.py"])
def test_example_runs_on_cpu(example):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(fco.__file__)) + os.pathsep + \
        env.get("PYTHONPATH", "")
    env.setdefault("FCO_TIMEOUT_MS", "15000")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--standalone", os.path.join(ROOT, "examples", example), "--device", "cpu",
           "--iters", "3"]
    # own session: on a timeout the whole torchrun tree is killed, no rank left behind
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=ROOT, start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
        pytest.fail(f"{example} did not finish in 180 s:\n{stdout}{stderr}")
    assert p.returncode == 0, stdout + stderr
    assert "-> OK" in stdout, stdout + stderr
