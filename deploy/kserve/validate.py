"""Checks the deploy/kserve manifests before they go to a cluster: each document against the model of the project
that owns its kind (KServe's Python SDK for InferenceService, the Kubernetes client for HorizontalPodAutoscaler
and ConfigMap), field by field (unknown fields, wrong types and missing required fields are errors, as the API
server's strict validation makes them), then what no schema can catch: the predictor's container is
`kserve-container`, its probes and ports are the ones its `vit serve` arguments serve, the HPA scales the
predictor's Deployment on a metric the Prometheus adapter serves. With --serve VIT MODEL it also starts the
container's `vit serve` command on loopback (the model folder for /mnt/models, free ports for its own) and
asks every probe's path: each must answer 200.

    python deploy/kserve/validate.py [--serve build/vit MODEL_DIR] deploy/kserve/*.yaml
    (run by the venv scripts/setup.sh makes for it: .venv-kserve/bin/python)

Prints one line per document; exit status 0 when all are valid, 1 naming every problem otherwise."""
import argparse
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import kserve
import kubernetes.client as k8s
import yaml

KINDS = {("serving.kserve.io/v1beta1", "InferenceService"): "V1beta1InferenceService",
         ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2HorizontalPodAutoscaler",
         ("v1", "ConfigMap"): "V1ConfigMap"}
PRIMITIVES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "object": (object,),
              "date": (str,), "datetime": (str,), "bytes": (str,)}


def model_class(name):
    for owner in (kserve, k8s):
        cls = getattr(owner, name, None)
        if cls is not None:
            return cls
    raise KeyError(f"no model {name} in kserve or kubernetes")


def build(value, type_name, path, errors):
    """value (from YAML) as an instance of the model type_name names, checked field by field; errors appended."""
    if value is None:
        return None
    if m := re.fullmatch(r"[Ll]ist\[(.+)\]", type_name):
        if not isinstance(value, list):
            errors.append(f"{path}: {value!r} is not a list ({type_name})")
            return None
        return [build(v, m.group(1), f"{path}[{i}]", errors) for i, v in enumerate(value)]
    if m := re.fullmatch(r"[Dd]ict[(\[]([^,]+), (.+)[)\]]", type_name):
        if not isinstance(value, dict):
            errors.append(f"{path}: {value!r} is not a mapping ({type_name})")
            return None
        return {k: build(v, m.group(2), f"{path}.{k}", errors) for k, v in value.items()}
    if type_name in PRIMITIVES:
        if not isinstance(value, PRIMITIVES[type_name]) or (type_name in ("int", "float") and isinstance(value, bool)):
            errors.append(f"{path}: {value!r} is a {type(value).__name__}, expected {type_name}")
        return value
    cls = model_class(type_name)
    if not isinstance(value, dict):
        errors.append(f"{path}: {value!r} is not an object ({type_name})")
        return None
    fields = {json_key: attr for attr, json_key in cls.attribute_map.items()}
    kwargs, before = {}, len(errors)
    for key, v in value.items():
        if key not in fields:
            errors.append(f"{path}.{key}: {type_name} has no field '{key}'")
            continue
        kwargs[fields[key]] = build(v, cls.openapi_types[fields[key]], f"{path}.{key}", errors)
    if len(errors) > before:  # a field is wrong already: the object is not made (one error, not one per level)
        return None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:  # the model's own checks: required fields, allowed values
        problems = e.errors() if hasattr(e, "errors") else None  # pydantic's, one per field
        if problems:
            for p in problems:
                field = ".".join(str(x) for x in p["loc"])
                errors.append(f"{path}.{field}: {type_name}: {p['msg']}")
        else:
            errors.append(f"{path}: {type_name}: {e}")
        return None


def flag(args, name, default=None):
    return args[args.index(name) + 1] if name in args[:-1] else default


def serve_ports(container):
    """(HTTP port, gRPC port or None) that the container's `vit serve` arguments listen on."""
    args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    grpc = flag(args, "--grpc-port")
    return int(flag(args, "--port", 8080)), int(grpc) if grpc is not None else None


def probe_port(container, probe):
    port = probe["httpGet"].get("port")
    if isinstance(port, str):  # a named port
        named = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
        return named.get(port)
    return port


def check_predictor(doc, errors):
    """What a schema cannot say about the InferenceService's predictor."""
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    for i, c in enumerate(((doc.get("spec") or {}).get("predictor") or {}).get("containers") or []):
        where = f"spec.predictor.containers[{i}]"
        if c.get("name") != "kserve-container":
            errors.append(f"{where}.name: {c.get('name')!r}: KServe runs the predictor's container named kserve-container")
        http, grpc = serve_ports(c)
        declared = [p.get("containerPort") for p in c.get("ports") or []]
        for port, what in ((http, "--port"), (grpc, "--grpc-port")):
            if port is not None and port not in declared:
                errors.append(f"{where}.ports: {declared}: vit serve's {what} {port} is not declared")
        if grpc is not None and annotations.get("serving.kserve.io/deploymentMode") != "RawDeployment":
            errors.append("metadata.annotations: HTTP and gRPC on two ports need serving.kserve.io/deploymentMode: "
                          "RawDeployment (the serverless mode exposes one port)")
        for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = c.get(kind)
            if not probe:
                if kind != "startupProbe":
                    errors.append(f"{where}.{kind}: missing")
                continue
            if "httpGet" not in probe:
                errors.append(f"{where}.{kind}: not an httpGet probe of vit serve's HTTP routes")
                continue
            if probe_port(c, probe) != http:
                errors.append(f"{where}.{kind}.httpGet.port: {probe['httpGet'].get('port')!r} is not vit serve's "
                              f"HTTP port ({http}, --port)")


def check_documents(docs, errors):
    isvc = {d["metadata"]["name"] for d in docs if d.get("kind") == "InferenceService" and d.get("metadata")}
    served = set()
    for d in docs:
        if d.get("kind") == "ConfigMap":
            for text in (d.get("data") or {}).values():
                rules = (yaml.safe_load(text) or {}).get("rules") or []
                served |= {(r.get("name") or {}).get("as") for r in rules}
    for d in docs:
        if d.get("kind") != "HorizontalPodAutoscaler":
            continue
        target = (d.get("spec") or {}).get("scaleTargetRef") or {}
        if isvc and target.get("name") not in {f"{n}-predictor" for n in isvc}:
            errors.append(f"HorizontalPodAutoscaler: scaleTargetRef.name {target.get('name')!r} is not an "
                          f"InferenceService's predictor Deployment ({', '.join(sorted(n + '-predictor' for n in isvc))})")
        for m in (d.get("spec") or {}).get("metrics") or []:
            name = ((m.get("pods") or {}).get("metric") or {}).get("name")
            if m.get("type") == "Pods" and served and name not in served:
                errors.append(f"HorizontalPodAutoscaler: pods metric {name!r} is not one the Prometheus adapter serves "
                              f"({', '.join(sorted(filter(None, served)))})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe_status(url, patience_s=60):
    """The status a probe's path answers: 200, else the first other than 503 (a server still warming up answers
    503 until ready, as a kubelet's repeated probes would see), or 503 after patience_s."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            status = urllib.request.urlopen(url, timeout=10).status
        except urllib.error.HTTPError as e:
            status = e.code
        if status != 503 or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def serve_probes(vit, model, doc, errors):
    """Starts each predictor container's `vit serve` on loopback and asks its probes' paths for 200."""
    for i, c in enumerate(doc["spec"]["predictor"].get("containers") or []):
        http, grpc = serve_ports(c)
        mapped = {str(http): str(free_port())} | ({str(grpc): str(free_port())} if grpc is not None else {})
        args = [str(a) for a in c.get("args") or []]
        args = [model if a == "/mnt/models" else "127.0.0.1" if a == "0.0.0.0" else mapped.get(a, a)
                if j > 0 and args[j - 1] in ("--port", "--grpc-port") else a for j, a in enumerate(args)]
        proc = subprocess.Popen([vit, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            for line in proc.stderr:
                if "vit serve: ready" in line or "error" in line:
                    break
            if proc.poll() is not None:
                errors.append(f"spec.predictor.containers[{i}].args: vit serve {' '.join(args)} exited {proc.returncode}")
                continue
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = (c.get(kind) or {}).get("httpGet")
                if not probe:
                    continue
                status = probe_status(f"http://127.0.0.1:{mapped[str(http)]}{probe.get('path', '/')}")
                if status != 200:
                    errors.append(f"spec.predictor.containers[{i}].{kind}.httpGet.path: {probe.get('path')!r} answers "
                                  f"{status}, not 200, from vit serve")
        finally:
            proc.kill()
            proc.wait(30)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--serve", nargs=2, metavar=("VIT", "MODEL"), help="also run the predictor's vit serve and probe it")
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    errors, docs = [], []
    for f in a.files:
        for doc in yaml.safe_load_all(open(f)):
            if doc is None:
                continue
            kind = KINDS.get((doc.get("apiVersion"), doc.get("kind")))
            name = (doc.get("metadata") or {}).get("name")
            found = []
            if kind is None:
                found.append(f"apiVersion {doc.get('apiVersion')!r}, kind {doc.get('kind')!r}: not a kind this checks")
            else:
                build(doc, kind, doc["kind"], found)
                if doc["kind"] == "InferenceService":
                    check_predictor(doc, found)
                    if a.serve and not found:
                        serve_probes(*a.serve, doc, found)
            print(f"{f}: {doc.get('kind')} {name}: " + ("valid" if not found else f"{len(found)} problems"))
            errors += [f"{f}: {e}" for e in found]
            docs.append(doc)
    cross = []
    check_documents(docs, cross)
    errors += cross
    for e in errors:
        print("  " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
