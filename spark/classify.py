"""Labelling images with Spark: the image files of the inputs (local or shared paths, found as `vit classify`
finds them, or URIs that Spark's binaryFile source reads) are partitioned and classified by one
vit.Classifier per Python worker (vit_spark.py, with mapInPandas); the rows (file, top or error) are
written as JSON lines or Parquet. Started by scripts/spark-classify.sh."""
import argparse
import os
import re
import sys

# binaryFile folders contribute the files vit.find_images takes from a local folder, in any case
# (test_spark.py checks the two lists agree).
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "bmp", "webp", "tif", "tiff", "jp2", "j2k")
FOLDER_GLOB = "*.{" + ",".join("".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in ext)
                               for ext in IMAGE_EXTENSIONS) + "}"


def usage_error(message):
    print(f"spark-classify: error: {message}", file=sys.stderr)
    sys.exit(2)


DEFAULT_MODEL = "weights/deit_tiny_patch16_224.fb_in1k"


def default_model():
    """The default model from any folder: the current folder's weights/, else the repository's."""
    if os.path.exists(DEFAULT_MODEL):
        return DEFAULT_MODEL
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), DEFAULT_MODEL)


def model_options():
    """The engine's model-wide options (vit.model_options()) the job passes on to each vit.Classifier, but --threads:
    the job's own, the cores of a Spark task."""
    import vit

    return [o for o in vit.model_options() if o["name"] != "threads"]


def add_model_option(parser, o):
    """A flag for one of vit's model-wide options, as the vit command spells it."""
    kinds = {"int": {"type": int, "metavar": "N"}, "path": {"metavar": "PATH"}, "name": {"metavar": "NAME"},
             "precision": {"choices": o["choices"]}, "pool": {"choices": o["choices"]}}
    default = f" (default: {o['default']})" if o["default"] is not None else ""
    parser.add_argument(o["flag"], dest=o["name"], default=o["default"], help=o["help"] + default, **kinds[o["type"]])


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="spark-classify",
        description="Classify image files on a Spark cluster (or local[2]); one output row per image.",
        epilog="Exit status: 0 every image classified, 1 some images failed (their rows carry the error), "
        "2 bad usage, a missing input or an unusable model (before any work).",
    )
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="image files and folders (searched recursively)")
    p.add_argument("--list", metavar="FILE", help="a file of image paths, one per line (added to INPUT)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (Spark's part files)")
    p.add_argument("--master", help="Spark master URL (default: spark-submit's --master, else local[*])")
    p.add_argument("--model", default=default_model(),
                   help=f"model folder or .safetensors (default: {DEFAULT_MODEL} in the current folder, else in "
                   "this repository, as the vit command finds it)")
    p.add_argument("--executor-model", metavar="PATH",
                   help="the model's path on the executors, where it differs from --model's on the driver: the "
                   "NAME of a folder shipped with spark-submit --archives model.tar.gz#NAME, which executors unpack "
                   "in their working folder (default: --model's absolute path, on a file system every node shares)")
    p.add_argument("--topk", type=int, default=5, help="classes per image (default: 5)")
    p.add_argument("--batch", type=int, default=8, help="images per forward pass (default: 8)")
    p.add_argument("--threads", type=int, default=1,
                   help="cores per Spark task, and the engine's threads in it (default: 1)")
    p.add_argument("--format", default="json", choices=["json", "parquet"], help="default: json (JSON lines)")
    p.add_argument("--force", action="store_true", help="replace DIR if it exists")
    p.add_argument("--embed", action="store_true",
                   help="write each image's embedding (file, embedding, error) instead of its labels, as vit embed")
    p.add_argument("--head", action="store_true", help="with --embed: after the head (timm's model(x))")
    p.add_argument("--normalize", action="store_true", help="with --embed: embeddings of unit length")
    for o in model_options():
        add_model_option(p, o)
    a = p.parse_args(argv)
    for o in model_options():
        value = getattr(a, o["name"])
        if o["type"] == "int" and not o["min"] <= value <= o["max"]:
            usage_error(f"{o['flag']} must be 0 ({o['zero']}) or more, got {value}" if value < o["min"] else
                        f"{o['flag']} must be at most {o['max']}, got {value}")
    for name in ("topk", "batch", "threads"):
        if getattr(a, name) < 1:
            usage_error(f"--{name} must be at least 1, got {getattr(a, name)}")
    if a.list:
        try:
            with open(a.list, encoding="utf-8", errors="surrogateescape") as f:
                a.inputs += [line.rstrip("\n") for line in f if line.strip()]
        except OSError as e:
            usage_error(f"{a.list}: {e.strerror}")
    if not a.inputs:
        usage_error("no INPUT given (image files, folders, or --list FILE)")
    if (a.head or a.normalize) and not a.embed:
        usage_error("--head and --normalize go with --embed")
    if os.path.lexists(a.out) and not a.force:
        usage_error(f"{a.out}: already exists (--force replaces it)")
    return a


def has_scheme(path):
    head = path.split("/", 1)[0]
    return head.endswith(":") and len(head) > 2  # hdfs:, s3a:, file:; not a relative name


def classifier_options(a):
    """vit.Classifier's options the flags give, beyond precision, threads and batch: the model-wide ones (a path
    as every node reads it: absolute, unless a URI)."""
    options = {}
    for o in model_options():
        value = getattr(a, o["name"])
        if o["name"] != "precision":
            options[o["name"]] = os.path.abspath(value) if o["type"] == "path" and value and not has_scheme(value) else value
    return options


def as_flags(message):
    """vit's errors name its options by their keyword arguments (arch, max_patches); the job's user sets them with
    its flags, and reads them so."""
    names = "|".join(o["name"] for o in model_options() if o["name"] not in ("precision", "pool"))  # words in prose
    return re.sub(rf"(?<![\w./-])({names})(?![\w./-])", lambda m: "--" + m.group(1).replace("_", "-"), message)


def check_model(a):
    """Loads the model once on the driver, so that a bad one is refused before Spark starts any work."""
    import vit

    try:
        vit.Classifier(a.model, precision=a.precision, threads=1, batch=a.batch, **classifier_options(a))
    except (vit.Error, ValueError) as e:
        usage_error(as_flags(str(e)))
    # Executors open the model by this path: what --executor-model names (relative: in each executor's
    # working folder, where --archives unpack), else --model's absolute path, the same on every machine.
    if a.executor_model:
        return a.executor_model
    return a.model if has_scheme(a.model) else os.path.abspath(a.model)


def local_files(inputs):
    """The image files of local (or shared file system) paths, found as `vit classify` finds them:
    [(name as given, absolute path)], and error rows for entries that cannot be images."""
    import vit

    files, errors = [], []
    for found in vit.find_images(inputs):
        if "error" in found:
            errors.append((found["file"], None, found["error"]))
        else:
            files.append((found["file"], os.path.abspath(found["file"])))
    return files, errors


def uri_paths(spark, inputs):
    """URIs split into files and folders, each with Spark's qualified name (as binaryFile's `path`
    column spells it) mapped to the name as given."""
    jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
    files, folders = {}, {}
    for given in inputs:
        path = jvm.org.apache.hadoop.fs.Path(given)
        fs = path.getFileSystem(conf)
        try:
            status = fs.getFileStatus(path)
        except Exception:  # py4j's wrapper of java.io.FileNotFoundException and friends
            usage_error(f"{given}: no such file or folder")
        qualified = fs.makeQualified(path).toString()
        if status.isDirectory():
            folders[qualified.rstrip("/") + "/"] = given if given.endswith("/") else given + "/"
        else:
            files[qualified] = given
    return files, folders


def uri_images(spark, files, folders):
    """binaryFile's (path, content) rows for the URIs; folders give the files find_images would take."""
    reader = spark.read.format("binaryFile")
    frames = []
    if files:
        frames.append(reader.load(list(files)))
    if folders:
        frames.append(reader.option("recursiveFileLookup", "true").option("pathGlobFilter", FOLDER_GLOB)
                      .load(list(folders)))
    images = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    return images.select("path", "content")


def main(argv):
    a = parse_args(argv)
    model = check_model(a)
    local = [p for p in a.inputs if not has_scheme(p)]
    uris = [p for p in a.inputs if has_scheme(p)]
    for p in local:
        if not os.path.lexists(p):
            usage_error(f"{p}: no such file or folder")
    files, errors = local_files(local)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("vit classify")
    if a.master:  # else spark-submit's --master (or spark.master), never overridden here
        builder = builder.master(a.master)
    spark = (builder.config("spark.task.cpus", str(a.threads))  # the engine's threads are the task's cores
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(8 * a.batch))
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print(f"application {spark.sparkContext.applicationId} on {spark.sparkContext.master}", file=sys.stderr, flush=True)
    # The workers' half lives in a module of its own, shipped to them, so that its Classifier cache
    # outlives a task: a function of this script would be sent by value and start empty every time.
    here = os.path.dirname(os.path.abspath(__file__))
    spark.sparkContext.addPyFile(os.path.join(here, "vit_spark.py"))
    sys.path.insert(0, here)
    import vit_spark

    schema = vit_spark.EMBED_SCHEMA if a.embed else vit_spark.ROW_SCHEMA
    embed = {"head": a.head, "normalize": a.normalize} if a.embed else None
    parts = [spark.createDataFrame(errors, schema)]
    if files:
        slices = max(2 * spark.sparkContext.defaultParallelism, len(files) // 1024)
        frame = spark.sparkContext.parallelize(files, slices).toDF("file string, path string")
        parts.append(frame.mapInPandas(vit_spark.classify_files(model, a.precision, a.batch, a.topk, embed, classifier_options(a)), schema))
    if uris:
        uri_files, uri_folders = uri_paths(spark, uris)
        parts.append(uri_images(spark, uri_files, uri_folders).mapInPandas(
            vit_spark.classify_bytes(model, a.precision, a.batch, a.topk, uri_files, uri_folders, embed,
                                     classifier_options(a)), schema))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    rows.write.mode("overwrite" if a.force else "errorifexists").format(a.format).save(a.out)

    written = spark.read.schema(schema).format(a.format).load(a.out)
    total, failed = written.count(), written.filter("error IS NOT NULL").count()
    done = "embedded" if a.embed else "classified"
    print(f"{total} images: {total - failed} {done}, {failed} failed; rows in {a.out} ({a.format})")
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
