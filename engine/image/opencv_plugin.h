// The C interface of OpenCV's two plugins: libvit_opencv_image.so holds imgcodecs (WebP, TIFF, JPEG 2000),
// libvit_opencv_video.so videoio (FFmpeg). Linked into the engine they would cost every start ~250 ms and
// ~65 MB (GDAL, GDCM, FFmpeg...), so engine/image/opencv_io.cpp dlopen()s each the first time it is needed:
// a WebP costs imgcodecs' 139 libraries, not videoio's 244. Plain C types only.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped whenever a table below changes: a stale plugin is refused by name, not called.
#define VIT_OPENCV_ABI 2

// Storage for an 8-bit RGB image [height, width, 3], given by the caller; NULL when it cannot be had.
typedef uint8_t* (*VitCvAlloc)(void* ctx, int width, int height);

// libvit_opencv_image.so: vit_opencv_image_api().
typedef struct VitCvImageApi {
  int abi;  // VIT_OPENCV_ABI
  // Decodes an encoded image (already recognised as WebP, TIFF or JPEG 2000) to RGB, without EXIF
  // rotation. Returns 1; 0 with the reason in err; -1 when over OPENCV_IO_MAX_IMAGE_PIXELS (refused from
  // the header, nothing allocated).
  int (*decode)(const uint8_t* data, size_t size, VitCvAlloc alloc, void* ctx, char* err, size_t err_size);
} VitCvImageApi;

typedef struct VitCvFrame {
  int64_t index;  // 0 for the first frame
  double time_s;  // its presentation time
} VitCvFrame;

// libvit_opencv_video.so: vit_opencv_video_api().
typedef struct VitCvVideoApi {
  int abi;  // VIT_OPENCV_ABI
  // A video through FFmpeg; NULL with the reason in err when it cannot be opened.
  void* (*open)(const char* path, char* err, size_t err_size);
  // The next frame's place: 1, or 0 at the end (where the stream stopped; problem() says why).
  int (*grab)(void* video, VitCvFrame* frame);
  // The frame just grabbed, as RGB. Returns 1, or 0 with the reason in err.
  int (*retrieve)(void* video, VitCvAlloc alloc, void* ctx, char* err, size_t err_size);
  // What FFmpeg reported while reading so far (its first errors, then warnings), "" when nothing.
  const char* (*problem)(void* video);
  // Whether FFmpeg reported an error while the last frame grabbed was read (a frame of a damaged stream).
  int (*frame_damaged)(void* video);
  // The frame count the container announces (an estimate for some formats), 0 when it gives none.
  int64_t (*announced_frames)(void* video);
  void (*close)(void* video);
} VitCvVideoApi;

// The one symbol each plugin exports.
const VitCvImageApi* vit_opencv_image_api(void);
const VitCvVideoApi* vit_opencv_video_api(void);

#ifdef __cplusplus
}
#endif
