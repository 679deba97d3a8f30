"""A Ray Serve application of vit.Classifier: replicas of one Classifier each, loaded once from the model folder
shipped in the application's working_dir, answering POST / (the image as the body; ?topk=K) with
{"top": [{"index", "label", "prob"}, ...]} as `vit serve`'s /v1/classify does, or 400 with {"error": ...}
naming what is wrong with the image. Ray Serve adds replicas while each has more than target_ongoing_requests
requests under way, up to max_replicas (a CPU each: threads 1). From a folder holding vit_ray/ and the model:

    serve start --address HEAD:6379 --http-host 127.0.0.1 --http-port 8000
    serve run --address HEAD:6379 --working-dir . --name vit vit_ray.app:build model=deit_tiny_patch16_224.fb_in1k threads=1

`vit` itself must import on every node (the wheel installed there, or runtime_env pip)."""
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

import vit


@serve.deployment(ray_actor_options={"num_cpus": 1},
                  autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 2,
                                      "upscale_delay_s": 2, "downscale_delay_s": 30})
class Classifier:
    def __init__(self, model, threads=1):
        self.classifier = vit.Classifier(model, threads=threads)

    async def __call__(self, request: Request):
        topk = request.query_params.get("topk", "5")
        if not topk.isdigit() or not 1 <= int(topk) <= len(self.classifier.labels):
            return JSONResponse({"error": f"topk: '{topk}' is not a number from 1 to {len(self.classifier.labels)}"}, 400)
        body = await request.body()
        row = self.classifier.classify_encoded([("image", body)], topk=int(topk))[0]
        if "error" in row:
            return JSONResponse({"error": row["error"]}, 400)
        return JSONResponse({"top": row["top"]})


def build(args):
    """The application from `serve run`'s arguments: model (a folder in the working_dir) and threads."""
    return Classifier.bind(args["model"], int(args.get("threads", 1)))
