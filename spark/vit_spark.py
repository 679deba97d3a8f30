"""The workers' half of the Spark job (spark/classify.py ships this file to them): Arrow batches of image
files in, one row per image out, classified by a vit.Classifier that each Python worker loads once and
keeps across tasks. Files on a local or shared file system are read by the engine itself; anything else
arrives as the bytes Spark's binaryFile source read."""

ROW_SCHEMA = "file string, top array<struct<index:int, label:string, prob:double>>, error string"
EMBED_SCHEMA = "file string, embedding array<float>, error string"  # with --embed

_classifiers = {}  # (model, precision, batch, threads, options) -> vit.Classifier, per worker process


def classifier(model, precision, batch, threads, options=None):
    """options: more of vit.Classifier's keyword arguments (pool, max_patches, arch)."""
    import vit

    options = options or {}
    key = (model, precision, batch, threads, tuple(sorted(options.items())))
    if key not in _classifiers:
        _classifiers[key] = vit.Classifier(model, precision=precision, threads=threads, batch=batch, **options)
    return _classifiers[key]


def rows(results, names):
    """classify()'s dicts as a pandas frame of ROW_SCHEMA, each under the name the user gave."""
    import pandas as pd

    return pd.DataFrame({"file": names, "top": [r.get("top") for r in results],
                         "error": [r.get("error") for r in results]})


def embedding_rows(result, names):
    """embed()'s dict as a pandas frame of EMBED_SCHEMA: each input's embedding or error, in input order."""
    import pandas as pd

    failed = {e["index"]: e["error"] for e in result["errors"]}
    good = iter(result["embeddings"])
    embeddings = [None if i in failed else next(good) for i in range(len(names))]
    return pd.DataFrame({"file": names, "embedding": embeddings, "error": [failed.get(i) for i in range(len(names))]})


def given_name(path, files, folders):
    """The name of one of binaryFile's paths as the user gave it: the file itself, or its folder + the rest."""
    if path in files:
        return files[path]
    for qualified, given in folders.items():
        if path.startswith(qualified):
            return given + path[len(qualified):]
    return path


# The mapInPandas functions. They travel to the workers by value; the module, imported there, is what
# outlives a task (Spark reuses its Python workers), so the model loads once per worker. The engine runs
# on the task's cores (spark.task.cpus), so tasks side by side never oversubscribe a machine.

def classify_files(model, precision, batch, topk, embed=None, options=None):
    """Frames of (file: the name as given, path: absolute) -> rows; the engine reads each file. embed: a
    dict of Classifier.embed's options to write embeddings (EMBED_SCHEMA) instead of labels; options: more
    of the Classifier's (pool, max_patches, arch)."""

    def run(frames):
        from pyspark import TaskContext

        import vit_spark

        c = vit_spark.classifier(model, precision, batch, TaskContext.get().cpus(), options)
        for frame in frames:
            if embed is not None:
                yield vit_spark.embedding_rows(c.embed(list(frame["path"]), **embed), list(frame["file"]))
            else:
                yield vit_spark.rows(c.classify(list(frame["path"]), topk=topk), list(frame["file"]))

    return run


def classify_bytes(model, precision, batch, topk, files, folders, embed=None, options=None):
    """Frames of binaryFile's (path, content) -> rows, named as given (files, folders: see given_name)."""

    def run(frames):
        from pyspark import TaskContext

        import vit_spark

        c = vit_spark.classifier(model, precision, batch, TaskContext.get().cpus(), options)
        for frame in frames:
            names = [vit_spark.given_name(p, files, folders) for p in frame["path"]]
            images = list(zip(names, frame["content"]))
            if embed is not None:
                yield vit_spark.embedding_rows(c.embed_encoded(images, **embed), names)
            else:
                yield vit_spark.rows(c.classify_encoded(images, topk=topk), names)

    return run
