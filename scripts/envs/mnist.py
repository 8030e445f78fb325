"""Writes an MNIST-format data set into the shared data mount, from data already on disk.

The source is scikit-learn's bundled copy of the UCI "optical recognition of handwritten digits"
test set (`sklearn.datasets.load_digits`: 1,797 images of 8x8 pixels, values 0-16). Each image is
resized to 20x20 (bilinear) and centred in a 28x28 frame, as MNIST centres its 20x20 digits, scaled to
0-255, and written as the four IDX files MNIST readers expect. Nothing is downloaded. It is NOT the real
MNIST, and the README written next to the files says so.

    <env>/bin/python scripts/envs/mnist.py [--out /data/mnist]

Idempotent: when the files of this version are there, it returns before importing anything heavy.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Bump when the output changes (resize, split...): existing data sets are then rewritten.
VERSION = "1"
SEED = 0  # numpy's legacy RandomState: the same permutation on every numpy version.
TEST_SIZE = 297  # 1,500 training images, 297 held back
FILES = {
    "train-images-idx3-ubyte": 2051,
    "train-labels-idx1-ubyte": 2049,
    "t10k-images-idx3-ubyte": 2051,
    "t10k-labels-idx1-ubyte": 2049,
}
README = (
    "This is scikit-learn's 1,797 UCI handwritten digits, resized to 28x28, in MNIST IDX format"
    " — not the real MNIST.\n"
    """\

Source: sklearn.datasets.load_digits() (scikit-learn {sklearn}), a copy of the test part of the UCI
"Optical Recognition of Handwritten Digits" data set: 8x8 images, values 0-16, digits 0-9.
Each image was resized to 20x20 (bilinear), centred in a 28x28 frame like MNIST's digits, scaled to
0-255 and stored as unsigned bytes. Split (fixed, numpy RandomState({seed})): {train} training images,
{test} test images.

Files (big-endian IDX headers exactly as MNIST's; magic 2051 for images, 2049 for labels):
{listing}
Written by gpuportal's scripts/envs/mnist.py (version {version}); it is rewritten only when that
version changes. Real MNIST files (also .gz) dropped in here are read by the same notebooks.
""")


def resize_matrix(size_in: int, size_out: int) -> np.ndarray:
    """Bilinear interpolation weights (size_out x size_in), pixel centres aligned, edges clamped."""
    import numpy as np

    weights = np.zeros((size_out, size_in))
    for i in range(size_out):
        x = min(max((i + 0.5) * size_in / size_out - 0.5, 0.0), size_in - 1.0)
        low = int(np.floor(x))
        high = min(low + 1, size_in - 1)
        weights[i, low] += 1.0 - (x - low)
        weights[i, high] += x - low
    return weights


def digits_to_mnist(images: np.ndarray) -> np.ndarray:
    """(n, 8, 8) values 0-16 -> (n, 28, 28) uint8 0-255, the digit 20x20 in the middle."""
    import numpy as np

    weights = resize_matrix(8, 20)
    big = np.einsum("ij,njk,lk->nil", weights, images.astype(np.float64), weights)
    framed = np.zeros((len(images), 28, 28))
    framed[:, 4:24, 4:24] = big
    return np.clip(np.rint(framed * 255.0 / 16.0), 0, 255).astype(np.uint8)


def idx_bytes(array: np.ndarray, magic: int) -> bytes:
    """IDX: magic (0x0000 + type 0x08 unsigned byte + number of dims), then each dim, big-endian."""
    assert magic == 0x0800 + array.ndim and str(array.dtype) == "uint8"
    return struct.pack(f">{1 + array.ndim}I", magic, *array.shape) + array.tobytes(order="C")


def up_to_date(out: Path) -> bool:
    marker = out / ".gpuportal-version"
    return (marker.exists() and marker.read_text().strip() == VERSION
            and all((out / name).exists() for name in [*FILES, "README.txt"]))


def atomic_write(path: Path, data: bytes) -> None:
    """Readers (running notebooks) never see half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_bytes(data)
    temporary.chmod(0o644)
    temporary.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(os.environ.get("GPUPORTAL_DATA_DIR", "/data")) / "mnist"
    parser.add_argument("--out", type=Path, default=default)
    parser.add_argument("--force", action="store_true", help="rewrite even when up to date")
    args = parser.parse_args()
    out: Path = args.out
    if up_to_date(out) and not args.force:
        print(f"mnist: {out} up to date")
        return

    import numpy as np
    import sklearn
    from sklearn.datasets import load_digits  # reads the copy inside the package: no download

    digits = load_digits()
    images = digits_to_mnist(digits.images)
    labels = digits.target.astype(np.uint8)
    order = np.random.RandomState(SEED).permutation(len(labels))
    test, train = order[:TEST_SIZE], order[TEST_SIZE:]
    arrays = {
        "train-images-idx3-ubyte": images[train],
        "train-labels-idx1-ubyte": labels[train],
        "t10k-images-idx3-ubyte": images[test],
        "t10k-labels-idx1-ubyte": labels[test],
    }

    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    listing = ""
    for name, array in arrays.items():
        data = idx_bytes(array, FILES[name])
        atomic_write(out / name, data)
        listing += f"  {name:26} {array.shape!s:14} sha256 {hashlib.sha256(data).hexdigest()[:16]}\n"
    atomic_write(out / "README.txt", README.format(
        sklearn=sklearn.__version__, seed=SEED, train=len(train), test=len(test), listing=listing,
        version=VERSION).encode())
    atomic_write(out / ".gpuportal-version", f"{VERSION}\n".encode())
    print(f"mnist: wrote {len(train)} training + {len(test)} test images to {out}")


if __name__ == "__main__":
    main()
