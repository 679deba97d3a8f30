"""ViT image classification and embeddings on the CPU (oneDNN), with preprocessing and logits as timm's.

The engine is the extension module vit._vit; its names are this package's: Classifier, Batcher, Error,
find_images, model_options and __version__. docs/PYTHON.md describes them; vit/_vit.pyi gives their types."""
from ._vit import Batcher, Classifier, Error, __version__, find_images, model_options

__all__ = ["Batcher", "Classifier", "Error", "__version__", "find_images", "model_options"]
