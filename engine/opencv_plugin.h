// The C interface of libvit_opencv.so, the plugin that holds OpenCV's imgcodecs and videoio: linked into
// the engine they would cost every start ~260 ms and ~68 MB (GDAL, GDCM, FFmpeg...), so engine/opencv_io.cpp
// dlopen()s the plugin the first time a WebP, TIFF or JPEG 2000 file or a video is met. Plain C types only.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped whenever the table below changes: a stale plugin is refused by name, not called.
#define VIT_OPENCV_ABI 1

// Storage for an 8-bit RGB image [height, width, 3], given by the caller; NULL when it cannot be had.
typedef uint8_t* (*VitCvAlloc)(void* ctx, int width, int height);

typedef struct VitCvFrame {
  int64_t index;  // 0 for the first frame
  double time_s;  // its presentation time
} VitCvFrame;

typedef struct VitCvApi {
  int abi;  // VIT_OPENCV_ABI
  // Decodes an encoded image (already recognised as WebP, TIFF or JPEG 2000) to RGB, without EXIF
  // rotation. Returns 1; 0 with the reason in err; -1 when over OPENCV_IO_MAX_IMAGE_PIXELS (refused from
  // the header, nothing allocated).
  int (*decode)(const uint8_t* data, size_t size, VitCvAlloc alloc, void* ctx, char* err, size_t err_size);
  // A video through FFmpeg; NULL with the reason in err when it cannot be opened.
  void* (*video_open)(const char* path, char* err, size_t err_size);
  // The next frame's place: 1, or 0 at the end (where the stream stopped; video_problem says why).
  int (*video_grab)(void* video, VitCvFrame* frame);
  // The frame just grabbed, as RGB. Returns 1, or 0 with the reason in err.
  int (*video_retrieve)(void* video, VitCvAlloc alloc, void* ctx, char* err, size_t err_size);
  // What FFmpeg reported while reading so far (its first errors, then warnings), "" when nothing.
  const char* (*video_problem)(void* video);
  // Whether FFmpeg reported an error while the last frame grabbed was read (a frame of a damaged stream).
  int (*video_frame_damaged)(void* video);
  // The frame count the container announces (an estimate for some formats), 0 when it gives none.
  int64_t (*video_announced_frames)(void* video);
  void (*video_close)(void* video);
} VitCvApi;

// The one symbol the plugin exports.
const VitCvApi* vit_opencv_api(void);

#ifdef __cplusplus
}
#endif
