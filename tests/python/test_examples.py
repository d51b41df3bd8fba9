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


def c_example():
    exe = os.path.join(os.path.dirname(os.path.dirname(fco.lib_path())), "examples",
                       "gemv_allreduce")
    if not os.path.exists(exe):
        pytest.fail(f"{exe} missing: `make` builds it next to libfco")
    return exe


def run_c_example(args, transport="cpu"):
    env = dict(os.environ)
    env["FCO_TRANSPORT"] = transport
    env.setdefault("FCO_TIMEOUT_MS", "15000")
    return subprocess.run([c_example()] + args, capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_c_example_runs_on_cpu(dtype):
    p = run_c_example(["3", "64", "40", "2", dtype])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout and dtype in p.stdout, p.stdout


@pytest.mark.parametrize("args", [["3", "64", "40", "2", "f16"], ["3", "64", "40", "2", "BF16"],
                                  ["3x", "64", "40", "2"], ["3", "", "40"], ["3", "64", "-40"],
                                  ["3", "64", "40", "2", "f32", "extra"]])
def test_c_example_refuses_bad_arguments(args):
    """Any dtype word other than f32 / bf16 ran f32, and atoi took "3x" as 3 (session 62's
    user audit): now usage on stderr and exit 1, nothing run."""
    p = run_c_example(args)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "usage:" in p.stderr and "PASS" not in p.stdout, p.stdout + p.stderr


def test_c_example_unknown_transport_is_an_error():
    """A build without GPU buffers reported an unknown FCO_TRANSPORT as a skip (exit 77): now
    fco_comm_init_all refuses the name (INVALID_ARGUMENT), exit 1. With GPU buffers, the same."""
    p = run_c_example(["3", "64", "40", "2", "f32"], transport="bogus")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "bogus" in p.stdout + p.stderr, p.stdout + p.stderr
