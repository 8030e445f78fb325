"""Benchmark output parsers on real published outputs (see fixtures/README.md), their failures,
truncations and random input. Pure functions: no database, no Django."""

import json
import random
import time
from pathlib import Path

import pytest

from portal.benchmarks.parsers import PARSERS, parse

FIXTURES = Path(__file__).parent / "fixtures"
ALL_FIXTURES = sorted(p for p in FIXTURES.glob("*/*") if p.parent.name in PARSERS)


def load(tool: str, name: str) -> str:
    return (FIXTURES / tool / name).read_text()


def check_contract(result: dict) -> None:
    """What every result promises: a bool "parsed", a reason on failure, strict-JSON values."""
    assert isinstance(result["parsed"], bool)
    if not result["parsed"]:
        assert set(result) == {"parsed", "reason"}
        assert isinstance(result["reason"], str) and result["reason"]
        assert "parser error" not in result["reason"]  # the dispatcher's safety net did not fire
    json.dumps(result, allow_nan=False)


# --- fio ------------------------------------------------------------------------------------


def test_fio_3x_json():
    result = parse("fio", load("fio", "randread_3.33.json"))
    assert result["parsed"] and result["fio_version"] == "fio-3.33" and result["any_error"] is False
    (job,) = result["jobs"]
    assert (job["jobname"], job["rw"], job["bs"], job["error"]) == ("randread", "randread", "4k", 0)
    assert "write" not in job  # no I/O in that direction
    read = job["read"]
    assert read["bw_kib_s"] == 55351 and read["bw_bytes"] == 56679783
    assert read["bw_mib_s"] == pytest.approx(55351 / 1024)
    assert read["iops"] == pytest.approx(13837.837838)
    assert read["clat_p99_ns"] == 116224 and read["clat_p99_us"] == pytest.approx(116.224)
    assert read["lat_p99_ns"] is None  # fio printed no total-latency percentiles


def test_fio_3x_json_plus_two_jobs_global_options_merged():
    result = parse("fio", load("fio", "mixed_jsonplus_3.33.json"))
    seq, mixed = result["jobs"]
    assert (seq["jobname"], seq["rw"], seq["bs"]) == ("seqwrite", "write", "8k")  # bs from [global]
    assert (mixed["jobname"], mixed["rw"], mixed["bs"]) == ("randrw64k", "randrw", "64k")  # job wins
    assert set(seq) >= {"write"} and "read" not in seq
    assert mixed["read"]["clat_p99_ns"] == 440320 and mixed["write"]["clat_p99_ns"] == 17280


def test_fio_total_latency_percentiles():
    read = parse("fio", load("fio", "randread_lat_percentiles_3.33.json"))["jobs"][0]["read"]
    assert read["lat_p99_ns"] == 366592


def test_fio_2x_clat_is_microseconds():
    result = parse("fio", load("fio", "pkb_fio-2.1.4.json"))
    assert result["fio_version"] == "fio-2.1.4"
    assert [job["jobname"] for job in result["jobs"]] == [
        "sequential_write",
        "sequential_read",
        "random_write_test",
        "random_read_test",
        "random_read_test_parallel",
    ]
    write = result["jobs"][0]["write"]
    assert write["clat_p99_us"] == 823296 and write["clat_p99_ns"] == 823296 * 1000
    assert write["bw_kib_s"] == 68118 and write["bw_bytes"] == 68118 * 1024  # 2.x has no bw_bytes
    assert result["jobs"][0]["rw"] is None  # fio 2.1.4 did not print job options


def test_fio_2x_global_options():
    jobs = parse("fio", load("fio", "pkb_fio-2.17_global_options.json"))["jobs"]
    assert (jobs[0]["rw"], jobs[0]["bs"]) == ("randread", "16k")
    assert jobs[0]["read"]["clat_p99_us"] == 1352


def test_fio_job_error_in_json_after_error_lines():
    result = parse("fio", load("fio", "error_eisdir_3.33.txt"))
    assert result["parsed"] and result["any_error"] is True
    assert result["jobs"][0]["error"] == 21


def test_fio_own_error_message_is_the_reason():
    result = parse("fio", load("fio", "error_badopt_3.33.txt"))
    assert not result["parsed"] and "fio: failed parsing rw=bogus" in result["reason"]


def test_fio_truncated_json():
    text = load("fio", "randread_3.33.json")
    result = parse("fio", text[: len(text) // 2])
    assert not result["parsed"] and "no complete fio JSON" in result["reason"]


# --- nccl-tests -----------------------------------------------------------------------------


def test_nccl_newest_layout_two_nodes():
    result = parse("nccl", load("nccl", "a3mega_h100_2nodes_all_reduce.txt"))
    assert (result["dtype"], result["redop"]) == ("float", "sum")
    assert len(result["rows"]) == 31 and result["ranks"] == 16 and result["nodes"] == 2
    last = result["rows"][-1]
    assert last == {
        "size_bytes": 8589934592,
        "count": 2147483648,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "oop_time_us": 47535.0,
        "oop_algbw_gbps": 180.71,
        "oop_busbw_gbps": 338.82,
        "oop_wrong": 0,
        "ip_time_us": 47743.0,
        "ip_algbw_gbps": 179.92,
        "ip_busbw_gbps": 337.35,
        "ip_wrong": 0,
    }
    assert result["max_busbw_gbps"] == 338.82 and result["max_busbw_oop_gbps"] == 338.82
    assert result["max_busbw_oop_size_bytes"] == 8589934592
    assert result["avg_busbw_gbps"] == 70.742 and result["complete"] is True
    assert (result["any_wrong"], result["wrong_total"], result["oob_values"]) == (False, 0, 0)


def test_nccl_2019_layout_without_redop_root_and_error_column():
    result = parse("nccl", load("nccl", "dgx2_all_gather_2019_error_column.txt"))
    assert result["op"] == "all_gather" and result["redop"] is None
    assert result["rows"][0]["root"] is None and result["rows"][0]["redop"] is None
    # The old "error" column is a max deviation, not a count of wrong elements.
    assert all(row["oop_wrong"] is None for row in result["rows"]) and result["wrong_total"] is None
    assert result["oob_values"] == 4 and result["any_wrong"] is True
    assert result["max_busbw_gbps"] == 112.34 and result["max_busbw_oop_gbps"] == 73.75
    assert result["ranks"] == 12 and result["nodes"] == 1


def test_nccl_not_checked_is_none():
    result = parse("nccl", load("nccl", "pkb_all_reduce_2nodes.txt"))
    assert all(row["oop_wrong"] is None and row["ip_wrong"] is None for row in result["rows"])
    assert result["avg_busbw_gbps"] == 0.565546 and result["nodes"] == 2


def test_nccl_failure_message():
    result = parse("nccl", load("nccl", "rtx5090_test_nccl_failure.txt"))
    assert not result["parsed"]
    assert result["reason"].startswith("GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error")


def test_nccl_truncated_is_incomplete():
    text = load("nccl", "a3mega_h100_2nodes_all_reduce.txt")
    result = parse("nccl", text[: text.index("  1073741824 ") + 40])  # cut inside a row
    assert result["parsed"] and result["complete"] is False and result["avg_busbw_gbps"] is None
    assert result["rows"][-1]["size_bytes"] == 536870912


# --- tf_cnn_benchmarks ----------------------------------------------------------------------


def test_tf_cnn_single_gpu():
    assert parse("tf_cnn_benchmarks", load("tf_cnn_benchmarks", "bitfusion_v100_inception3_tf1.14.txt")) == {
        "parsed": True,
        "model": "inception3",
        "batch_size": 32,
        "num_gpus": 1,
        "total_images_per_sec": 199.65,
        "mode": "training",
        "tensorflow_version": "1.14",
        "precision": "fp32",
    }


def test_tf_cnn_horovod_interleaved_ranks():
    result = parse(
        "tf_cnn_benchmarks", load("tf_cnn_benchmarks", "azure_batchai_horovod_8gpu_resnet101_tf1.8.txt")
    )
    assert (result["model"], result["num_gpus"], result["batch_size"]) == ("resnet101", 8, 64)
    assert result["total_images_per_sec"] == 224.96


def test_tf_cnn_fp16_flag():
    text = load("tf_cnn_benchmarks", "bitfusion_v100_inception3_tf1.14.txt")
    assert (
        parse("tf_cnn_benchmarks", "python tf_cnn_benchmarks.py --use_fp16\n" + text)["precision"] == "fp16"
    )
    assert parse("tf_cnn_benchmarks", "--use_fp16=False\n" + text)["precision"] == "fp32"


def test_tf_cnn_oom_reason():
    result = parse("tf_cnn_benchmarks", load("tf_cnn_benchmarks", "summit_v100_resnet_oom.txt"))
    assert not result["parsed"] and "ResourceExhaustedError: OOM when allocating tensor" in result["reason"]


def test_tf_cnn_truncated():
    text = load("tf_cnn_benchmarks", "bitfusion_v100_inception3_tf1.14.txt")
    result = parse("tf_cnn_benchmarks", text[: text.index("total images")])
    assert not result["parsed"] and "total images/sec" in result["reason"]


# --- DeepLearningExamples ResNet-50 ---------------------------------------------------------


def test_dle_json_lines_summary():
    result = parse("dle_resnet", load("dle_resnet", "dllogger_example_resnet_log.json"))
    assert result == {
        "parsed": True,
        "throughput_img_s": 661.9801574510492,
        "precision": "amp",
        "gpus": 1,
        "batch_size": 128,
        "complete": True,
    }


def test_dle_text_tf_hard_wrapped_parameters():
    result = parse("dle_resnet", load("dle_resnet", "pkb_tf_resnet50_horovod_8gpu_fp16.txt"))
    assert result["throughput_img_s"] == pytest.approx(6638.003508038038)
    assert (result["precision"], result["gpus"], result["batch_size"], result["complete"]) == (
        "fp16",
        8,
        256,
        True,
    )


def test_dle_text_pytorch_without_summary_uses_last_iteration():
    result = parse("dle_resnet", load("dle_resnet", "dlperf_pytorch_rn50_2n8g_fp32_excerpt.txt"))
    assert result["throughput_img_s"] == 10393.54 and result["complete"] is False
    assert (result["precision"], result["gpus"], result["batch_size"]) == ("fp32", 16, 128)


def test_dle_failure_reason():
    text = load("dle_resnet", "dlperf_pytorch_rn50_2n8g_fp32_excerpt.txt")
    crashed = text[: text.index("RUNNING EPOCHS")] + "RuntimeError: CUDA error: out of memory\n"
    result = parse("dle_resnet", crashed)
    assert not result["parsed"] and result["reason"].endswith("CUDA error: out of memory")


# --- MLPerf ---------------------------------------------------------------------------------


def test_mlperf_success():
    result = parse("mlperf", load("mlperf", "v1.0_nvidia_dgxa100_mxnet_resnet_result_0.txt"))
    assert (result["benchmark"], result["org"], result["division"]) == ("resnet", "NVIDIA", "closed")
    assert (result["platform"], result["submission_status"]) == ("1xNVIDIA DGX A100", "onprem")
    assert (result["run_start_ms"], result["run_stop_ms"]) == (1621118646492, 1621120371034)
    assert result["run_minutes"] == pytest.approx((1621120371034 - 1621118646492) / 60000)
    assert result["status"] == "success" and result["global_batch_size"] == 3264
    assert result["final_eval_accuracy"] == 0.76066
    assert result["throughput_samples"][0] == pytest.approx(15982.398913364215)
    assert result["throughput_last"] == result["throughput_samples"][-1]


def test_mlperf_aborted():
    result = parse("mlperf", load("mlperf", "v1.0_nvidia_dgxa100_mxnet_resnet_result_1_aborted.txt"))
    assert result["parsed"] and result["status"] == "aborted" and result["final_eval_accuracy"] == 0.7584


def test_mlperf_truncated_before_run_stop():
    text = load("mlperf", "v1.0_nvidia_dgxa100_mxnet_resnet_result_0.txt")
    result = parse("mlperf", text[: text.index('"key": "run_stop"')])
    assert result["parsed"] and result["run_stop_ms"] is None and result["status"] is None
    assert result["run_minutes"] is None and result["run_start_ms"] == 1621118646492


def test_mlperf_without_mllog_reports_the_error():
    result = parse(
        "mlperf", "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access\n"
    )
    assert not result["parsed"] and "CUDA error: an illegal memory access" in result["reason"]


def test_mlperf_without_throughput_keys():
    lines = load("mlperf", "v1.0_nvidia_dgxa100_mxnet_resnet_result_0.txt").splitlines()
    text = "\n".join(line for line in lines if '"tracked_stats"' not in line and '"throughput"' not in line)
    result = parse("mlperf", text)
    assert result["throughput_samples"] is None and result["throughput_last"] is None


# --- p2pBandwidthLatencyTest ----------------------------------------------------------------


def test_p2p_matrices():
    assert parse("p2p", load("p2p", "autodl_2x2080ti_p2p_disabled.txt")) == {
        "parsed": True,
        "num_gpus": 2,
        "connectivity": [[1, 0], [0, 1]],
        "any_p2p": False,
        "p2p_enabled_unidirectional_gbps": [[538.62, 5.72], [5.72, 532.54]],
        "p2p_enabled_unidirectional_diag_gbps": [538.62, 532.54],
        "p2p_enabled_bidirectional_gbps": [[533.34, 6.10], [6.10, 534.01]],
        "p2p_enabled_latency_gpu_us": [[1.32, 14.99], [13.63, 1.25]],
    }


def test_p2p_truncated_keeps_what_was_printed():
    text = load("p2p", "autodl_2x2080ti_p2p_disabled.txt")
    result = parse("p2p", text[: text.index("Bidirectional P2P=Disabled")])
    assert result["p2p_enabled_unidirectional_gbps"] == [[538.62, 5.72], [5.72, 532.54]]
    assert result["p2p_enabled_bidirectional_gbps"] is None and result["p2p_enabled_latency_gpu_us"] is None


def test_p2p_cuda_error():
    text = (
        "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"
        "CUDA error at p2pBandwidthLatencyTest.cu:646 code=100(cudaErrorNoDevice) "
        '"cudaGetDeviceCount(&numGPUs)"\n'
    )
    result = parse("p2p", text)
    assert not result["parsed"] and result["reason"].startswith(
        "CUDA error at p2pBandwidthLatencyTest.cu:646"
    )


# --- nvidia-smi -----------------------------------------------------------------------------


def test_nvidia_smi_topo_with_nics():
    result = parse("nvidia_smi", load("nvidia_smi", "nccl_issue_topo_m_nics.txt"))
    assert (result["kind"], result["gpus"], result["nics"]) == ("topo", 3, ["NIC0", "NIC1"])
    assert result["gpu_links"]["GPU0"] == {"GPU1": "NV4", "GPU2": "NODE", "NIC0": "NODE", "NIC1": "NODE"}
    assert result["cpu_affinity"] == {"GPU0": "64-71", "GPU1": "64-71", "GPU2": "64-71"}
    assert result["numa_affinity"]["GPU2"] == "1"


def test_nvidia_smi_topo_pcie():
    result = parse("nvidia_smi", load("nvidia_smi", "autodl_topo_m_2gpu.txt"))
    assert result["gpu_links"] == {"GPU0": {"GPU1": "PIX"}, "GPU1": {"GPU0": "PIX"}}
    assert result["cpu_affinity"]["GPU1"] == "24-47,72-95" and result["nics"] == []


def test_nvidia_smi_query_csv_with_units():
    result = parse("nvidia_smi", load("nvidia_smi", "pkb_query_power.csv"))
    assert result["kind"] == "query_csv" and result["columns"] == ["index", "power.draw [W]", "timestamp"]
    assert result["first_row"] == {"index": 0, "power.draw [W]": 16.48, "timestamp": "2022/09/28 15:36:51.68"}
    assert result["gpus"] == 1 and result["last_row"] == result["rows"][-1]


def test_nvidia_smi_query_csv_noheader_nounits():
    text = "0, 81559, 3, [N/A]\n1, 81559, 0, 45\n"
    result = parse("nvidia_smi", text)
    assert result["columns"] is None and result["gpus"] is None
    assert result["rows"] == [{"0": 0, "1": 81559, "2": 3, "3": None}, {"0": 1, "1": 81559, "2": 0, "3": 45}]


def test_nvidia_smi_driver_failure():
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    result = parse("nvidia_smi", text)
    assert not result["parsed"] and result["reason"].startswith("NVIDIA-SMI has failed")


def test_nvidia_smi_truncated_topo():
    text = load("nvidia_smi", "nccl_issue_topo_m_nics.txt")
    assert not parse("nvidia_smi", text.splitlines()[0])["parsed"]


# --- dispatch and robustness ----------------------------------------------------------------


def test_unknown_tool_names_the_known_ones():
    result = parse("hpl", "anything")
    assert not result["parsed"] and all(tool in result["reason"] for tool in PARSERS)


def test_non_str_text():
    assert not parse("fio", b"{}")["parsed"]  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_and_its_truncations(path):
    text = path.read_text()
    for cut in range(0, len(text) + 1, max(1, len(text) // 40)):
        check_contract(parse(path.parent.name, text[:cut]))


@pytest.mark.parametrize("tool", sorted(PARSERS))
@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(tool, seed):
    text = random.Random(seed).randbytes(4096).decode("utf-8", errors="replace")
    result = parse(tool, text)
    check_contract(result)
    assert not result["parsed"]


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_large_input_stays_fast(tool):
    blob = "".join(path.read_text() for path in ALL_FIXTURES) * 3  # ~2.5 MB of mixed real output
    started = time.monotonic()
    check_contract(parse(tool, blob))
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_huge_and_non_finite_numbers(tool):
    text = (
        '{"fio version": "fio-3.33", "jobs": [{"jobname": "x", "error": 1e999, "read": '
        '{"io_bytes": 1e999, "bw": 1e999, "iops": -1e999, "clat_ns": {"percentile": {"99.0": 1e999}}}}]}\n'
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
        f"{'9' * 400}  {'9' * 400}  float  sum  -1  1e999  nan  inf  {'9' * 400}  1e400  1e400  1e400  N/A\n"
        "total images/sec: 1e999\n"
        "DLL 2020-01-01 00:00:00.0 - Summary: train.total_ips : 1e999 img/s\n"
        ':::MLLOG {"key": "run_start", "time_ms": 1e999, "value": null}\n'
        "P2P Connectivity Matrix\n   D\\D 0\n     0 1e999\n"
        f"index, power.draw [W]\n0, {'9' * 400}.5 W\n"
    )
    check_contract(parse(tool, text))
