"""The bed's nvidia-smi stand-in (slurm/dev/nvidia-smi) answers the real query interface from the
state files beside the fake devices, and gpu-busy (slurm/dev/gpu-busy) marks a job's GPUs busy while
a command runs. Run from the source files against a folder of their own (GPUPORTAL_GPU_DIR), and,
where the bed is up, the installed programs against the bed's own GPUs."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SMI = ROOT / "slurm/dev/nvidia-smi"
BUSY = ROOT / "slurm/dev/gpu-busy"
ALL = ("index,uuid,name,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,"
       "temperature.gpu")


@pytest.fixture
def gpus(tmp_path):
    """A node 'n1' with 4 GPUs (plain files stand in for the devices: only names are looked at)."""
    for n in range(4):
        (tmp_path / "n1" / f"nvidia{n}").parent.mkdir(exist_ok=True)
        (tmp_path / "n1" / f"nvidia{n}").touch()
    (tmp_path / "n1" / "nvidia2.state").write_text(json.dumps(
        {"utilization_gpu": 87, "utilization_memory": 41.4, "memory_used_mib": 12345.6, "power_w": 250.5,
         "temperature_c": 61}))
    return tmp_path


def smi(gpus, *args, node="n1", env=None):
    return subprocess.run([sys.executable, str(SMI), *args], capture_output=True, text=True, check=False,
                          env={**os.environ, "GPUPORTAL_GPU_DIR": str(gpus), "SLURMD_NODENAME": node,
                               **(env or {})})


def rows(text):
    return list(csv.reader(io.StringIO(text), skipinitialspace=True))


def test_csv_with_header_and_units_lists_every_gpu_of_the_node(gpus):
    out = smi(gpus, f"--query-gpu={ALL}", "--format=csv", env={"CUDA_VISIBLE_DEVICES": "1"})
    assert out.returncode == 0, out
    table = rows(out.stdout)
    assert table[0] == ["index", "uuid", "name", "utilization.gpu [%]", "utilization.memory [%]",
                        "memory.used [MiB]", "memory.total [MiB]", "power.draw [W]", "temperature.gpu"]
    assert [r[0] for r in table[1:]] == ["0", "1", "2", "3"]  # as the real one: no CUDA_VISIBLE_DEVICES
    busy, idle = table[3], table[1]
    assert busy[3:] == ["87 %", "41 %", "12346 MiB", "81920 MiB", "250.50 W", "61"]
    assert idle[3:] == ["0 %", "0 %", "0 MiB", "81920 MiB", "0.00 W", "0"]
    assert busy[1].startswith("GPU-") and busy[1] != idle[1] and "gpuportal stand-in" in busy[2]


@pytest.mark.parametrize(("spec", "header", "units"), [
    ("csv", True, True), ("csv,noheader", False, True), ("csv,nounits", True, False),
    ("csv,noheader,nounits", False, False), ("csv,nounits,noheader", False, False)])
def test_every_format_variant(gpus, spec, header, units):
    out = smi(gpus, "--query-gpu=power.draw,index,utilization.gpu", f"--format={spec}", "-i", "2")
    assert out.returncode == 0, out
    table = rows(out.stdout)
    if header:
        assert table.pop(0) == ["power.draw [W]", "index", "utilization.gpu [%]"]  # units stay in the header
    assert table == [["250.50 W", "2", "87 %"]] if units else [["250.50", "2", "87"]]


@pytest.mark.parametrize(("args", "indexes"), [
    (["-i", "1,3"], ["1", "3"]), (["--id=0"], ["0"]), (["--id", "3,0"], ["3", "0"]),
    ([], ["0", "1", "2", "3"])])
def test_i_selects(gpus, args, indexes):
    out = smi(gpus, "--query-gpu=index", "--format=csv,noheader", *args)
    assert out.stdout.split() == indexes


def test_an_unknown_gpu_or_node_finds_no_devices(gpus):
    for out in (smi(gpus, "--query-gpu=index", "--format=csv", "-i", "7"),
                smi(gpus, "--query-gpu=index", "--format=csv", node="elsewhere")):
        assert (out.returncode, out.stdout.strip()) == (6, "No devices were found")


def test_an_unknown_field_is_the_real_tools_error(gpus):
    out = smi(gpus, "--query-gpu=index,gpu.magic", "--format=csv")
    assert out.returncode == 2
    assert out.stdout == 'Field "gpu.magic" is not a valid field to query.\n\n'


def test_a_missing_format_is_refused(gpus):
    assert smi(gpus, "--query-gpu=index").returncode == 2


@pytest.mark.parametrize("garbage", [
    "", "not json", "[1, 2]", "null", '{"utilization_gpu": "high", "power_w": null}',
    '{"utilization_gpu": -5, "memory_used_mib": 1e30}', '{"utilization_gpu": NaN}', "\x00\xff" * 10])
def test_garbage_state_reads_as_zero_never_a_crash(gpus, garbage):
    (gpus / "n1" / "nvidia0.state").write_bytes(garbage.encode("utf-8", "surrogatepass")
                                                if isinstance(garbage, str) else garbage)
    out = smi(gpus, "--query-gpu=utilization.gpu,memory.used,power.draw", "--format=csv,noheader,nounits",
              "-i", "0")
    assert out.returncode == 0, out
    values = rows(out.stdout)[0]
    assert values[0] == "0" and values[2] == "0.00"
    assert values[1] in ("0", "81920")  # an absurd figure is clamped to the card's memory


def test_a_state_folder_that_cannot_be_read_is_no_gpus(tmp_path):
    out = smi(tmp_path / "nowhere", "--query-gpu=index", "--format=csv")
    assert out.returncode == 6


def test_list_and_version_say_what_it_is(gpus):
    assert "gpuportal stand-in" in smi(gpus, "--version").stdout
    listed = smi(gpus, "-L").stdout.splitlines()
    assert len(listed) == 4 and listed[0].startswith("GPU 0: ") and "(UUID: GPU-" in listed[0]
    assert "gpuportal stand-in" in smi(gpus).stdout


def test_gpu_busy_marks_the_jobs_gpus_while_the_command_runs_and_restores_them(gpus, tmp_path):
    seen = tmp_path / "seen.csv"
    env = {**os.environ, "GPUPORTAL_GPU_DIR": str(gpus), "SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "1,2",
           "CUDA_VISIBLE_DEVICES": "0,1"}
    query = (f"{sys.executable} {SMI} --query-gpu=index,utilization.gpu,power.draw "
             "--format=csv,noheader,nounits")
    before = (gpus / "n1" / "nvidia2.state").read_text()
    done = subprocess.run([sys.executable, str(BUSY), "--util", "55", "--", "sh", "-c",
                           f"{query} > {seen}; exit 3"], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 3, done.stderr
    assert rows(seen.read_text()) == [["0", "0", "0.00"], ["1", "55", "310.00"], ["2", "55", "310.00"],
                                      ["3", "0", "0.00"]]
    assert (gpus / "n1" / "nvidia2.state").read_text() == before
    after = smi(gpus, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", "1").stdout
    assert after.strip() == "0"


@pytest.mark.integration
def test_the_bed_installs_both_and_the_state_files_are_the_contract():
    """On the bed: /usr/local/bin/nvidia-smi reads /var/lib/gpuportal/gpu/<node>/nvidia<N>.state."""
    if not Path("/var/lib/gpuportal/gpu/gpu-node1").is_dir() or shutil.which("gpu-busy") is None:
        pytest.skip("needs the bed (make up)")
    state = Path("/var/lib/gpuportal/gpu/gpu-node2/nvidia3.state")
    saved = state.read_bytes()
    try:
        state.write_text('{"utilization_gpu": 12, "memory_used_mib": 345, "power_w": 67.8}')
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,power.draw",
                              "--format=csv,noheader,nounits", "-i", "3"], capture_output=True, text=True,
                             env={**os.environ, "SLURMD_NODENAME": "gpu-node2"}, check=True)
        assert out.stdout == "3, 12, 345, 67.80\n"
    finally:
        state.write_bytes(saved)
    assert oct(state.stat().st_mode & 0o777) == "0o666"  # gpu-busy runs as the job's user
