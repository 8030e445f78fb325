"""Inference benchmark: throughput and latency per precision and batch size, and the top-1/top-5 of
each precision against FP32 on a validation set, INT8 calibrated on a separate part of that set.

Engines, the first that can run here: NVIDIA's trtexec on a GPU (TensorRT), else PyTorch (INT8: its
own static quantization, fbgemm/x86 on a CPU). The report names the engine that ran, and why the
others did not; nothing is ever printed for an engine that did not run. The portal parses the table
(portal/benchmarks/parsers/inference.py), so its layout is a contract.

Timing: every timed iteration is timed on its own (a synchronised device), and the timed loop's wall
time is measured around them; the share of that wall time the iterations cover is printed ("timed
%"). Loading, calibration and warm-up are reported apart and never counted.
"""

import argparse
import copy
import gzip
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
TRTEXEC_WARMUP_MS = 500  # trtexec warms up for a time, not a count of iterations


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("mnist-cnn", "resnet50", "custom"), default="mnist-cnn")
    parser.add_argument("--checkpoint", default="", help="a state_dict; for custom, a TorchScript file")
    parser.add_argument("--precisions", default="fp32,int8")
    parser.add_argument("--batch-sizes", default="1,8,64")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--data", default="/data/mnist", help="MNIST IDX folder or ImageNet-style folder")
    parser.add_argument("--calibration-images", type=int, default=100)
    parser.add_argument("--engine", choices=("auto", "tensorrt", "pytorch"), default="auto")
    parser.add_argument("--smoke", action="store_true", help="CPU, few iterations, at most 1000 images")
    parser.add_argument("--dry-run", action="store_true", help="print the trtexec command lines only")
    args = parser.parse_args(argv)
    args.precisions = [p for p in args.precisions.split(",") if p]
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    if unknown := set(args.precisions) - set(PRECISIONS):
        parser.error(f"unknown precisions {sorted(unknown)}; use {', '.join(PRECISIONS)}")
    if "fp32" not in args.precisions:
        args.precisions.insert(0, "fp32")  # every accuracy is stated against FP32's
    if args.smoke:
        args.warmup, args.iterations = min(args.warmup, 3), min(args.iterations, 20)
    return args


# --- data: a real loader for MNIST's IDX files and for an ImageNet-style validation folder --------


def idx_read(path: Path) -> Any:
    import numpy as np

    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as file:
        zero, kind, ndim = struct.unpack(">HBB", file.read(4))
        if zero != 0 or kind != 0x08:
            raise ValueError(f"{path}: not an IDX file of unsigned bytes")
        shape = struct.unpack(f">{ndim}I", file.read(4 * ndim))
        data = np.frombuffer(file.read(), dtype=np.uint8)
    return data.reshape(shape)


def dataset_load(folder: Path, *, image_side: int, channels: int, limit: int) -> tuple[Any, Any]:
    """(images N x C x H x W float32, labels N int64): MNIST's test split (t10k), normalised as
    pytorch-train trains, or an ImageFolder-style tree (one folder per class) resized and normalised
    as torchvision's ImageNet models expect."""
    import torch

    def find(stem: str) -> Path | None:
        return next((p for p in (folder / stem, folder / f"{stem}.gz") if p.exists()), None)

    images_file, labels_file = find("t10k-images-idx3-ubyte"), find("t10k-labels-idx1-ubyte")
    if images_file and labels_file:
        images = torch.from_numpy(idx_read(images_file)[:limit].astype("float32") / 255.0)
        labels = torch.from_numpy(idx_read(labels_file)[:limit].astype("int64"))
        images = ((images - 0.1307) / 0.3081).unsqueeze(1)
        if channels == 3 or images.shape[-1] != image_side:
            images = torch.nn.functional.interpolate(images, size=image_side).expand(-1, channels, -1, -1)
        return images.contiguous(), labels
    from torchvision import datasets, transforms

    prepare = transforms.Compose([
        transforms.Resize(256 * image_side // 224), transforms.CenterCrop(image_side), transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    tree = datasets.ImageFolder(str(folder), transform=prepare)
    # Spread over the classes (ImageFolder lists them in order): every class is in both parts.
    step = max(1, len(tree) // limit)
    picked = [tree[i] for i in range(0, len(tree), step)][:limit]
    return torch.stack([image for image, _ in picked]), torch.tensor([label for _, label in picked])


# --- the model ----------------------------------------------------------------------------------------


def mnist_cnn() -> Any:
    """The network templates/notebooks/mnist_ddp.py trains (pytorch-train's default script)."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10),
    )


def model_load(args: argparse.Namespace) -> tuple[Any, str]:
    """The FP32 model in eval mode and a line saying what it is."""
    import torch

    checkpoint = Path(args.checkpoint).expanduser() if args.checkpoint else None
    if args.model == "custom":
        if checkpoint is None:
            raise SystemExit("model custom needs a checkpoint: a TorchScript file or a pickled module")
        try:
            return torch.jit.load(str(checkpoint), map_location="cpu").eval(), f"TorchScript {checkpoint}"
        except RuntimeError:
            # A whole pickled module: the user's own file, run as the user.
            model = torch.load(checkpoint, map_location="cpu", weights_only=False)
            return model.eval(), f"PyTorch module {checkpoint}"
    if args.model == "mnist-cnn":
        model = mnist_cnn()
    else:
        import torchvision

        model = torchvision.models.resnet50()
    if checkpoint is None:
        # No download here: random weights, said plainly (their top-1 is chance).
        return model.eval(), f"{args.model}, random weights (no checkpoint: top-1 is chance)"
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    state = state.get("state_dict", state) if isinstance(state, dict) else state
    # A DDP-wrapped model's state has a 'module.' prefix.
    model.load_state_dict({re.sub(r"^module\.", "", key): value for key, value in state.items()})
    return model.eval(), f"{args.model} weights from {checkpoint}"


# --- figures ------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def topk(logits: Any, labels: Any) -> tuple[float, float | None]:
    """Top-1 and top-5 (None with 5 classes or fewer: it would be 1 by construction)."""
    top1 = (logits.argmax(1) == labels).float().mean().item()
    if logits.shape[1] <= 5:
        return top1, None
    best5 = logits.topk(5, dim=1).indices
    return top1, (best5 == labels.unsqueeze(1)).any(1).float().mean().item()


# --- PyTorch engine -----------------------------------------------------------------------------------


class TorchEngine:
    name = "pytorch"

    def __init__(self, model: Any, device: Any, calibration: Any) -> None:
        import torch

        self.torch, self.model, self.device, self.calibration = torch, model, device, calibration
        self.title = f"PyTorch {torch.__version__} ({device.type}" + (
            f", {torch.cuda.get_device_name(device)})" if device.type == "cuda" else
            f", {torch.get_num_threads()} threads)")

    def prepare(self, precision: str) -> tuple[Any, Any]:
        """The callable for `precision` and the dtype its inputs take."""
        torch = self.torch
        if precision == "fp32":
            return self.model.to(self.device), torch.float32
        if precision in ("fp16", "bf16"):
            dtype = torch.float16 if precision == "fp16" else torch.bfloat16
            return copy.deepcopy(self.model).to(self.device, dtype), dtype
        if self.device.type == "cuda":
            raise Unsupported("PyTorch's INT8 kernels run on the CPU only; TensorRT is the GPU's INT8 engine")
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

        backend = "x86" if "x86" in torch.backends.quantized.supported_engines else "fbgemm"
        torch.backends.quantized.engine = backend
        with warnings.catch_warnings():
            # torch.ao.quantization says it is deprecated (for torchao), once per observer.
            warnings.simplefilter("ignore")
            observed = prepare_fx(copy.deepcopy(self.model).cpu(), get_default_qconfig_mapping(backend),
                                  (self.calibration[:1],))
            with torch.inference_mode():
                for start in range(0, len(self.calibration), 64):
                    observed(self.calibration[start:start + 64])
            return convert_fx(observed), torch.float32

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)


class Unsupported(Exception):
    """This precision cannot run on this engine here; the report says why."""


def torch_measure(engine: TorchEngine, run: Any, dtype: Any, images: Any, batch: int, warmup: int,
                  iterations: int) -> dict[str, float]:
    torch = engine.torch
    # A few distinct real batches, on the device before timing: the loop times the model alone.
    count = min(4, max(1, len(images) // batch))
    index = torch.arange(count * batch) % len(images)
    batches = [images[index[i * batch:(i + 1) * batch]].to(engine.device, dtype) for i in range(count)]
    with torch.inference_mode():
        began = time.perf_counter()
        for i in range(warmup):
            run(batches[i % count])
        engine.synchronize()
        warmup_s = time.perf_counter() - began
        latencies = []
        loop_start = time.perf_counter()
        for i in range(iterations):
            start = time.perf_counter()
            run(batches[i % count])
            engine.synchronize()
            latencies.append(time.perf_counter() - start)
        wall = time.perf_counter() - loop_start
    return _figures(latencies, wall, batch, warmup_s)


def _figures(latencies: list[float], wall: float, batch: int, warmup_s: float) -> dict[str, float]:
    return {
        "images_per_sec": batch * len(latencies) / wall,
        "p50_ms": 1000 * percentile(latencies, 50),
        "p90_ms": 1000 * percentile(latencies, 90),
        "p99_ms": 1000 * percentile(latencies, 99),
        "timed_pct": 100 * sum(latencies) / wall,
        "warmup_s": warmup_s,
    }


def torch_accuracy(engine: TorchEngine, run: Any, dtype: Any, images: Any, labels: Any
                   ) -> tuple[float, float | None]:
    torch = engine.torch
    with torch.inference_mode():
        logits = torch.cat([run(images[i:i + 256].to(engine.device, dtype)).float().cpu()
                            for i in range(0, len(images), 256)])
    return topk(logits, labels)


# --- TensorRT (trtexec) -------------------------------------------------------------------------------


def trtexec_argv(*, onnx: str, precision: str, batch: int, input_name: str, shape: tuple[int, ...],
                 iterations: int, calibration_cache: str, times: str) -> list[str]:
    """The exact trtexec command line for one precision and batch size: one engine per batch size
    (min = opt = max shape), --duration=0 so that --iterations alone decides the timed count, and
    the percentiles the report prints."""
    argv = ["trtexec", f"--onnx={onnx}",
            f"--shapes={input_name}:{'x'.join(str(d) for d in (batch, *shape))}",
            f"--warmUp={TRTEXEC_WARMUP_MS}", f"--iterations={iterations}", "--duration=0",
            "--percentile=50,90,99", f"--exportTimes={times}"]
    if precision in ("fp16", "bf16"):
        argv.append(f"--{precision}")
    elif precision == "int8":
        argv += ["--int8", f"--calib={calibration_cache}"]
    return argv


_TRT_SUMMARY = {
    "qps": r"Throughput: ([\d.]+) qps",
    "p50_ms": r"Latency: .*?median = ([\d.]+) ms",
    "p90_ms": r"Latency: .*?percentile\(90%\) = ([\d.]+) ms",
    "p99_ms": r"Latency: .*?percentile\(99%\) = ([\d.]+) ms",
    "gpu_compute_s": r"Total GPU Compute Time: ([\d.]+) s",
    "walltime_s": r"Total Host Walltime: ([\d.]+) s",
}


def trtexec_summary(text: str) -> dict[str, float]:
    found = {}
    for key, pattern in _TRT_SUMMARY.items():
        if match := re.search(pattern, text):
            found[key] = float(match.group(1))
    return found


def trtexec_ready(args: argparse.Namespace) -> str | None:
    """Why trtexec cannot run here, or None."""
    if args.smoke:
        return "smoke mode runs on the CPU"
    if not shutil.which("trtexec"):
        return "no trtexec on PATH (load the site's TensorRT module or pick the TensorRT container)"
    smi = shutil.which("nvidia-smi")
    version = subprocess.run([smi, "--version"], capture_output=True, text=True).stdout if smi else ""
    if not smi or "gpuportal stand-in" in version:
        return "no NVIDIA GPU here"
    if not _imports("onnx"):
        return "the model goes to trtexec as ONNX, and the onnx package is not in this environment"
    return None


def onnx_export(model: Any, example: Any, path: Path) -> None:
    """The FP32 model as ONNX with a dynamic batch dimension (TorchScript-based exporter: it needs no
    package beyond torch)."""
    import torch

    torch.onnx.export(model.cpu().eval(), (example,), str(path), input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      dynamo=False)


def calibration_cache_write(onnx: Path, calibration: Any, cache: Path) -> str | None:
    """INT8 scales from the calibration images, written as trtexec's --calib cache by TensorRT's own
    entropy calibrator; None when done, else why not (trtexec --int8 without a cache has no real
    scales: its INT8 figures would mean nothing)."""
    try:
        import tensorrt as trt
    except ImportError:
        return "writing the calibration cache needs TensorRT's Python module (tensorrt)"
    batch = min(32, len(calibration))

    class Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            super().__init__()
            whole = range(0, len(calibration) - batch + 1, batch)
            self.batches = iter([calibration[i:i + batch] for i in whole])
            self.current = None

        def get_batch_size(self) -> int:
            return batch

        def get_batch(self, names: list[str]) -> list[int] | None:
            self.current = next(self.batches, None)
            if self.current is None:
                return None
            self.current = self.current.cuda().contiguous()
            return [int(self.current.data_ptr())]

        def read_calibration_cache(self) -> None:
            return None

        def write_calibration_cache(self, data: Any) -> None:
            cache.write_bytes(bytes(data))

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx.read_bytes()):
        return "TensorRT could not parse the ONNX model: " + "; ".join(
            str(parser.get_error(i)) for i in range(parser.num_errors))
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    calibrator = Calibrator()
    config.int8_calibrator = calibrator
    profile = builder.create_optimization_profile()
    shape = (batch, *calibration.shape[1:])
    profile.set_shape("input", shape, shape, shape)
    config.add_optimization_profile(profile)
    config.set_calibration_profile(profile)
    if builder.build_serialized_network(network, config) is None or not cache.exists():
        return "TensorRT's calibration failed (see its messages above)"
    return None


def tensorrt_run(args: argparse.Namespace, model: Any, calibration: Any, images: Any) -> None:
    """One trtexec run per precision and batch size; its summary becomes the row (trtexec times
    every iteration itself; its output is kept beside the job as trtexec-<precision>-<batch>.log)."""
    onnx, cache = Path("model.onnx"), Path("calibration.cache")
    onnx_export(model, images[:1], onnx)
    int8_problem = calibration_cache_write(onnx, calibration, cache) if "int8" in args.precisions else None
    for precision in args.precisions:
        for batch in args.batch_sizes:
            if precision == "int8" and int8_problem:
                print(row(precision, batch, "tensorrt", None, None, f"not run: {int8_problem}"))
                continue
            argv = trtexec_argv(onnx=str(onnx), precision=precision, batch=batch, input_name="input",
                                shape=tuple(images.shape[1:]), iterations=args.iterations,
                                calibration_cache=str(cache), times=f"times-{precision}-{batch}.json")
            done = subprocess.run(argv, capture_output=True, text=True)
            Path(f"trtexec-{precision}-{batch}.log").write_text(done.stdout + done.stderr)
            summary = trtexec_summary(done.stdout)
            if done.returncode != 0 or "qps" not in summary:
                print(row(precision, batch, "tensorrt", None, None,
                          f"not run: trtexec exited {done.returncode} (trtexec-{precision}-{batch}.log)"))
                continue
            figures = {"images_per_sec": summary["qps"] * batch, "p50_ms": summary.get("p50_ms"),
                       "p90_ms": summary.get("p90_ms"), "p99_ms": summary.get("p99_ms")}
            print(row(precision, batch, "tensorrt", figures, None,
                      "top-1 not measured: trtexec times the engine on random inputs"), flush=True)


# --- the run ------------------------------------------------------------------------------------------


def engine_choice(args: argparse.Namespace) -> tuple[str, list[str]]:
    """The engine that will run and why the ones before it did not."""
    skipped = []
    for name in ("tensorrt", "pytorch"):
        if args.engine not in ("auto", name):
            continue
        if name == "tensorrt":
            why = trtexec_ready(args)
        else:
            why = None if _imports("torch") else "torch does not import in this environment"
        if why is None:
            return name, skipped
        skipped.append(f"{name}: {why}")
    raise NoEngine("; ".join(skipped))


class NoEngine(Exception):
    """No engine asked for can run here; the message says why each cannot."""


def _imports(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def row(precision: str, batch: int, engine: str, figures: dict[str, float] | None,
        accuracy: tuple[float, float | None] | None, note: str = "") -> str:
    def number(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    figures = figures or {}
    top1, top5 = accuracy or (None, None)
    return (f"{precision:<9} {batch:>5}  {engine:<11} {number(figures.get('images_per_sec'), '.1f'):>10} "
            f"{number(figures.get('p50_ms'), '.3f'):>9} {number(figures.get('p90_ms'), '.3f'):>9} "
            f"{number(figures.get('p99_ms'), '.3f'):>9} {number(top1, '.4f'):>7} {number(top5, '.4f'):>7} "
            f"{number(figures.get('timed_pct'), '.1f'):>7}{'  ' + note if note else ''}")


HEADER = (f"{'precision':<9} {'batch':>5}  {'engine':<11} {'images/s':>10} {'p50 ms':>9} {'p90 ms':>9} "
          f"{'p99 ms':>9} {'top-1':>7} {'top-5':>7} {'timed %':>7}")


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.dry_run:
        for precision in args.precisions:
            for batch in args.batch_sizes:
                print(" ".join(trtexec_argv(
                    onnx="model.onnx", precision=precision, batch=batch, input_name="input",
                    shape=(1, 28, 28) if args.model == "mnist-cnn" else (3, 224, 224),
                    iterations=args.iterations, calibration_cache="calibration.cache",
                    times=f"times-{precision}-{batch}.json")))
        return 0
    began = time.perf_counter()
    print("Inference benchmark (gpuportal inference-benchmark template)", flush=True)
    try:
        engine_name, skipped = engine_choice(args)
    except NoEngine as why:
        # No stand-in figure: a number from another engine would be mistaken for this one's.
        print(f"SIMULATED: no inference was measured, no engine asked for can run here ({why}).")
        return 0 if args.smoke else 1
    import torch

    cuda = torch.cuda.is_available() and not args.smoke
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda:
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    model, described = model_load(args)
    side, channels = (28, 1) if args.model == "mnist-cnn" else (224 if not args.smoke else 64, 3)
    limit = 1000 if args.smoke else 1_000_000
    images, labels = dataset_load(Path(args.data).expanduser(), image_side=side, channels=channels,
                                  limit=args.calibration_images + limit)
    if len(images) <= args.calibration_images:
        raise SystemExit(f"{args.data}: {len(images)} images, not more than the "
                         f"{args.calibration_images} set aside for calibration")
    calibration, images, labels = images[:args.calibration_images], images[args.calibration_images:], \
        labels[args.calibration_images:]
    loaded_s = time.perf_counter() - began
    if engine_name == "tensorrt":
        print(f"Engine:       TensorRT trtexec ({shutil.which('trtexec')})")
    else:
        engine = TorchEngine(model, device, calibration)
        print(f"Engine:       {engine.title}")
    for line in skipped:
        print(f"Not used:     {line}")
    print(f"Model:        {described}")
    print(f"Data:         {args.data}: {len(calibration)} images for INT8 calibration, "
          f"{len(images)} other images for accuracy ({int(labels.max()) + 1} classes)")
    warmup = f"{TRTEXEC_WARMUP_MS} ms" if engine_name == "tensorrt" else str(args.warmup)
    print(f"Iterations:   {warmup} warm-up, {args.iterations} timed per precision and batch size"
          f"{' (smoke mode, CPU)' if args.smoke else ''}")
    print(f"Load:         {loaded_s:.2f} s (model and data, not timed)")
    print(HEADER)
    if engine_name == "tensorrt":
        tensorrt_run(args, model, calibration, images)
        print(f"Total:        {time.perf_counter() - began:.1f} s")
        return 0
    accuracies: dict[str, tuple[float, float | None]] = {}
    for precision in args.precisions:
        prepared = time.perf_counter()
        try:
            run, dtype = engine.prepare(precision)
            accuracies[precision] = torch_accuracy(engine, run, dtype, images, labels)
        except (Unsupported, RuntimeError) as why:  # RuntimeError: no kernel for it on this device
            for batch in args.batch_sizes:
                print(row(precision, batch, engine.name, None, None, f"not run: {why}"))
            continue
        setup = time.perf_counter() - prepared
        for batch in args.batch_sizes:
            figures = torch_measure(engine, run, dtype, images, batch, args.warmup, args.iterations)
            print(row(precision, batch, engine.name, figures, accuracies[precision],
                      f"warm-up {figures['warmup_s']:.3f} s"), flush=True)
        print(f"Prepared:     {precision} in {setup:.2f} s (incl. calibration and accuracy, not timed)")
    fp32 = accuracies.get("fp32")
    for precision, (top1, top5) in accuracies.items():
        if precision == "fp32" or fp32 is None:
            continue
        five = "" if top5 is None or fp32[1] is None else (
            f", top-5 {100 * top5:.2f} % vs {100 * fp32[1]:.2f} % ({100 * (top5 - fp32[1]):+.2f} points)")
        print(f"Accuracy:     {precision} vs fp32 on {len(images)} images: top-1 {100 * top1:.2f} % vs "
              f"{100 * fp32[0]:.2f} % ({100 * (top1 - fp32[0]):+.2f} points){five}")
    print(f"Total:        {time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
