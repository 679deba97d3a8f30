# Type stubs of the extension module vit._vit (python/vit_module.cpp), whose names the package vit gives:
# what editors complete and type checkers read. python/tests/test_stubs.py keeps them in step with the
# module's own signatures.
import os
import sys
from typing import Iterable, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt
from PIL.Image import Image as PILImage

if sys.version_info >= (3, 11):
    from typing import Literal, NotRequired, TypedDict
else:
    from typing_extensions import Literal, NotRequired, TypedDict

__version__: str

# A path as os.fsdecode takes it.
Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
# An image in memory: a PIL image (as img.convert("RGB") gives it), or uint8 RGB [H, W, 3] / [N, H, W, 3].
ImageInMemory = Union[PILImage, npt.NDArray[np.uint8]]
# An encoded image file in memory: (name, bytes).
Encoded = Tuple[Path, Union[bytes, bytearray]]

class Error(RuntimeError):
    """The engine's error: a model, config, labels or text-embeddings file that cannot be used."""

class Prediction(TypedDict):
    index: int
    label: str
    prob: float

class Result(TypedDict):
    """One image's answer, as a `vit classify --json` line: its top classes or its error."""
    file: str
    top: NotRequired[List[Prediction]]
    error: NotRequired[str]
    frame: NotRequired[int]  # classify_video
    time_s: NotRequired[float]  # classify_video

class EmbedError(TypedDict):
    index: int
    file: str
    error: str

class Embeddings(TypedDict):
    files: List[str]
    embeddings: npt.NDArray[np.float32]  # [n, E]
    tokens: NotRequired[npt.NDArray[np.float32]]  # [n, T, D], with tokens=True
    errors: List[EmbedError]

class Found(TypedDict):
    file: str
    error: NotRequired[str]

class Config(TypedDict):
    file: str
    arch: str
    family: str
    stored_as: str
    precision: str
    patch: int
    width: int
    depth: int
    heads: int
    mlp: int
    classes: int
    input_size: Tuple[int, int, int]
    tokens: int
    parameters: int
    pool: str
    interpolation: str
    crop_mode: str
    crop_pct: float
    resize: int
    mean: Tuple[float, float, float]
    std: Tuple[float, float, float]

def find_images(paths: Iterable[Path], *, videos: bool = False) -> List[Found]:
    """Image files and folders -> the files `vit classify` would classify, in its order."""

class ModelOption(TypedDict):
    name: str
    flag: str
    type: Literal["int", "path", "name", "precision"]
    default: Union[int, str, None]
    min: Optional[int]
    max: Optional[int]
    zero: Optional[str]
    choices: Optional[Tuple[str, ...]]
    help: str

def model_options() -> List[ModelOption]:
    """The model-wide options Classifier() takes, as the command line's flags: name, flag, type, default, range, help."""

class Classifier:
    """A ViT image classifier, loaded once. Calls may come from several threads at once."""

    def __init__(
        self,
        model: Path,
        *,
        precision: Literal["f32", "bf16", "int8"] = "f32",
        threads: int = 0,
        img_size: int = 0,
        max_patches: int = 0,
        config: Optional[Path] = None,
        arch: Optional[str] = None,
        labels: Optional[Path] = None,
        text_embeddings: Optional[Path] = None,
        batch: int = 8,
        max_pixels: int = 100000000,
        exif_transpose: bool = False,
        pool: Optional[Literal["cls", "token", "mean", "avg", "map"]] = None,
    ) -> None: ...
    def classify(self, paths: Iterable[Union[Path, ImageInMemory]], topk: int = 5) -> List[Result]:
        """Image files and images in memory -> one dict per image, in order."""
    def classify_video(self, path: Path, *, every: int = 0, fps: Optional[float] = None, topk: int = 5) -> List[Result]:
        """A video file -> one dict per sampled frame (every Nth, or fps per second of video)."""
    def classify_encoded(self, images: Iterable[Encoded], topk: int = 5) -> List[Result]:
        """Encoded image files in memory, (name, bytes) pairs -> dicts as classify() gives."""
    def embed(
        self,
        paths: Iterable[Union[Path, ImageInMemory]],
        *,
        head: bool = False,
        tokens: bool = False,
        normalize: bool = False,
        every: int = 0,
        fps: Optional[float] = None,
    ) -> Embeddings:
        """Image or video files and images in memory -> their embeddings, as `vit embed -o` writes them."""
    def embed_encoded(
        self, images: Iterable[Encoded], *, head: bool = False, tokens: bool = False, normalize: bool = False
    ) -> Embeddings:
        """Encoded image files in memory -> a dict as embed() gives."""
    def embed_text(self, texts: Iterable[str], *, normalize: bool = False) -> npt.NDArray[np.float32]:
        """Texts -> their embeddings [n, E] by the model's text tower (a CLIP or SigLIP checkpoint's)."""
    def logits(self, images: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Preprocessed images [B, 3, H, W] -> timm's model(x) [B, N]."""
    def preprocess(self, path: Path) -> npt.NDArray[np.float32]:
        """An image file as the model is fed it: [3, H, W]."""
    @property
    def config(self) -> Config:
        """What the engine understood of the model, as `vit inspect` prints it."""
    @property
    def labels(self) -> List[str]:
        """The class names, indexed by class."""
    @property
    def classes(self) -> int:
        """The number of classes classify() ranks; 0 for a model without a classifier head."""

class Batcher:
    """Dynamic batching over a Classifier: calls from many threads run together in shared forward passes."""

    def __init__(self, classifier: Classifier, *, max_batch: int = 16, max_delay_ms: int = 0, max_queue: int = 256) -> None: ...
    def classify_encoded(self, images: Iterable[Encoded], topk: int = 5) -> List[Result]:
        """As Classifier.classify_encoded, queued with other threads' images."""
    def classify(self, images: Iterable[Union[Encoded, ImageInMemory]], topk: int = 5) -> List[Result]:
        """Images in memory -> dicts as Classifier.classify gives, queued with other threads' images."""
    def embed(
        self,
        images: Iterable[Union[Encoded, ImageInMemory]],
        *,
        head: bool = False,
        tokens: bool = False,
        normalize: bool = False,
    ) -> Embeddings:
        """Images in memory -> a dict as Classifier.embed gives, queued with other threads' images."""
    @property
    def queued(self) -> int:
        """Images waiting."""
    def close(self) -> None:
        """Refuses new calls and answers the queued ones."""

