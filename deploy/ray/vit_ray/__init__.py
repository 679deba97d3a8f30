"""vit under Ray Serve: a deployment answering POST / with an image as `vit serve`'s /v1/classify answers it,
scaled by Ray Serve on the requests each replica has ongoing (vit_ray.app)."""
