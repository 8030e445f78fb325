"""Data-parallel CNN training on MNIST-format IDX files with PyTorch DistributedDataParallel.

One process per GPU (NCCL backend); without CUDA, CPU processes talking over gloo. Start it with
torchrun, which sets RANK, LOCAL_RANK and WORLD_SIZE for every process:

    torchrun --standalone --nproc_per_node=2 mnist_ddp.py --epochs 3

`python mnist_ddp.py` also works (one process). Rank 0 writes TensorBoard events to --logdir and the
final metrics to <logdir>/metrics.json, the weights to <logdir>/model.pt, and prints the metrics as
`FINAL_METRICS {...}`.
With MLFLOW_TRACKING_URI set (the portal sets it in batch jobs) and mlflow installed, rank 0 also logs
its params and scalars to MLflow as it trains: the job's page draws them live.
(03-pytorch-ddp.ipynb runs this file; the batch template "pytorch-train" runs it the same way.)
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from torch.utils.tensorboard import SummaryWriter


def idx_read(path: Path) -> np.ndarray:
    """One IDX file (MNIST's format): 0x0000, a type byte (0x08 = unsigned byte), the number of
    dimensions, each dimension as a big-endian uint32, then the data."""
    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as file:
        zero, kind, ndim = struct.unpack(">HBB", file.read(4))
        if zero != 0 or kind != 0x08:
            raise ValueError(f"{path}: not an IDX file of unsigned bytes")
        shape = struct.unpack(f">{ndim}I", file.read(4 * ndim))
        data = np.frombuffer(file.read(), dtype=np.uint8)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {data.size} bytes of data for shape {shape}")
    return data.reshape(shape)


def mnist_load(data_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """split: "train" or "t10k". Plain or gzipped files, as MNIST is usually shipped."""
    def find(stem: str) -> Path:
        for path in (data_dir / stem, data_dir / f"{stem}.gz"):
            if path.exists():
                return path
        raise FileNotFoundError(f"{data_dir / stem}(.gz) not found")
    return idx_read(find(f"{split}-images-idx3-ubyte")), idx_read(find(f"{split}-labels-idx1-ubyte"))


def tensors(images: np.ndarray, labels: np.ndarray) -> TensorDataset:
    # MNIST's usual normalisation constants; they suit the resized digits too.
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - 0.1307) / 0.3081
    return TensorDataset(x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64)))


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10),
    )


def tracker() -> Any:
    """The MLflow client with a run started, when a tracking server is set (the portal sets
    MLFLOW_TRACKING_URI and a token in its batch jobs) and the client is installed, else None: rank 0
    then logs the same scalars there as it trains, which the job's page charts live. A tracking server
    that is down or refuses costs the curves, never the training."""
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        return None
    try:
        import mlflow

        mlflow.config.enable_async_logging()  # points go in batches from a thread: training never waits
        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME") or "mnist-ddp")
        # A sweep's task names its run and tags it with the sweep and its index (portal.sweeps).
        mlflow.start_run(run_name=os.environ.get("MLFLOW_RUN_NAME") or os.environ.get("SLURM_JOB_NAME"),
                         tags=json.loads(os.environ.get("MLFLOW_RUN_TAGS") or "{}"))
    except Exception as error:  # ImportError, or whatever the client raises for the server
        print(f"MLflow tracking off: {error}", file=sys.stderr, flush=True)
        return None
    return mlflow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path,
                        default=Path(os.environ.get("GPUPORTAL_DATA_DIR", "/data")) / "mnist")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=1e-3, help="scaled by the number of processes")
    parser.add_argument("--train-limit", type=int, default=0, help="only this many training images (0: all)")
    # In a portal batch job TENSORBOARD_LOGDIR is the job's own folder, whose events its page charts.
    parser.add_argument("--logdir", type=Path, default=Path(os.environ.get("TENSORBOARD_LOGDIR") or (
        Path.home() / "logs" / "pytorch-ddp" / time.strftime("%Y%m%d-%H%M%S"))))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=10, help="batches between live loss points (MLflow)")
    args = parser.parse_args()

    # Under torchrun these are set; alone, this is a world of one.
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    cuda = torch.cuda.is_available()
    if cuda:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        # N processes share this job's cores (its cpuset, not the whole node): each takes its share.
        cores = len(os.sched_getaffinity(0))
        torch.set_num_threads(max(1, cores // int(os.environ["LOCAL_WORLD_SIZE"])))
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    world = dist.get_world_size()
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)

    images, labels = mnist_load(args.data_dir, "train")
    if args.train_limit:
        images, labels = images[: args.train_limit], labels[: args.train_limit]
    train, test = tensors(images, labels), tensors(*mnist_load(args.data_dir, "t10k"))
    # Each rank trains on its own 1/world of the data, and evaluates its own 1/world of the test set.
    sampler = DistributedSampler(train, shuffle=True, seed=args.seed)
    test_sampler = DistributedSampler(test, shuffle=False)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, pin_memory=cuda)
    test_loader = DataLoader(test, batch_size=512, sampler=test_sampler)

    model = DistributedDataParallel(cnn().to(device), device_ids=[local_rank] if cuda else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * world)
    amp = cuda  # mixed precision on GPUs; bf16 needs no loss scaling
    amp_dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=amp and amp_dtype == torch.float16)
    writer = SummaryWriter(str(args.logdir)) if rank == 0 else None
    mlflow = tracker() if rank == 0 else None
    if rank == 0:
        print(f"world={world} backend={dist.get_backend()} device={device} amp={amp} "
              f"train={len(train)} test={len(test)} data={args.data_dir}", flush=True)
    if mlflow:
        mlflow.log_params({"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                           "train_limit": args.train_limit, "seed": args.seed, "world_size": world})
    batches = 0

    metrics: dict[str, float | int | str] = {}
    for epoch in range(1, args.epochs + 1):
        model.train()
        sampler.set_epoch(epoch)
        totals = torch.zeros(3, device=device)  # loss sum, correct, seen
        start = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                logits = model(x)
                loss = nn.functional.cross_entropy(logits, y)
            scaler.scale(loss).backward()  # DDP all-reduces the gradients here
            scaler.step(optimizer)
            scaler.update()
            correct = (logits.argmax(1) == y).sum()
            seen = y.new_tensor(len(y)).float()
            totals += torch.stack([loss.detach().float() * len(y), correct.float(), seen])
            batches += 1
            if mlflow and batches % args.log_every == 0:  # a live curve inside long epochs
                mlflow.log_metric("loss/train_batch", loss.item(), step=batches)
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        dist.all_reduce(totals)
        slowest = torch.tensor(seconds, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # the epoch lasts as long as its slowest rank

        model.eval()
        counts = torch.zeros(2, device=device)  # correct, seen
        with torch.no_grad(), torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
            for x, y in test_loader:
                x, y = x.to(device), y.to(device)
                correct = (model(x).argmax(1) == y).sum()
                counts += torch.stack([correct.float(), y.new_tensor(len(y)).float()])
        dist.all_reduce(counts)

        loss_sum, correct, seen = totals.tolist()
        metrics = {
            "epoch": epoch,
            "train_loss": round(loss_sum / seen, 4),
            "train_accuracy": round(correct / seen, 4),
            # DistributedSampler pads the test set to a multiple of world: a few images count twice.
            "test_accuracy": round(counts[0].item() / counts[1].item(), 4),
            "images_per_sec": round(seen / slowest.item(), 1),
            "world_size": world,
            "backend": dist.get_backend(),
        }
        if writer:
            scalars = {tag: metrics[key] for tag, key in (
                ("loss/train", "train_loss"), ("accuracy/train", "train_accuracy"),
                ("accuracy/test", "test_accuracy"), ("throughput/images_per_sec", "images_per_sec"))}
            for tag, value in scalars.items():
                writer.add_scalar(tag, value, epoch)
            if mlflow:
                mlflow.log_metrics(scalars, step=epoch)
            print(json.dumps(metrics), flush=True)

    if writer:
        writer.close()
        (args.logdir / "metrics.json").write_text(json.dumps(metrics) + "\n")
        # The weights, for the inference-benchmark template (a job's page links it with this path).
        torch.save(model.module.state_dict(), args.logdir / "model.pt")
        print("FINAL_METRICS " + json.dumps(metrics), flush=True)
    if mlflow:
        try:
            mlflow.end_run()  # flushes the last points
        except Exception as error:
            print(f"MLflow: the last points were not logged: {error}", file=sys.stderr, flush=True)
    dist.barrier()  # all ranks leave together: gloo aborts a rank whose peers left first
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
