// Reading what our exact decoders do not cover: WebP, TIFF and JPEG 2000 images through OpenCV's imgcodecs
// in libvit_opencv_image.so, videos through its videoio in libvit_opencv_video.so (opencv_plugin.h), each
// dlopen()ed the first time it is needed so that nothing else pays for it. Failures throw vit::Error
// naming the file and the problem.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/image/image.h"

struct VitCvVideoApi;

namespace vit {

// The folders the engine's plugins (OpenCV's two, SentencePiece's) are looked for in, in order; VIT_OPENCV_PLUGIN_DIR
// names the one folder outright.
std::vector<std::string> plugin_dirs();

// "WebP", "TIFF" or "JPEG 2000" for the formats OpenCV decodes here (image_format(), by content, never by the
// name), else nullptr. Only these reach OpenCV: its other readers (GDAL, GDCM, OpenEXR...) never see our input.
const char* opencv_image_format(ImageFormat format);

// Decodes bytes of a format opencv_image_format() names to RGB, with no EXIF rotation (as PIL opens them,
// TIFF included). max_pixels is handed to OpenCV (OPENCV_IO_MAX_IMAGE_PIXELS, read once per process)
// when a plugin is first loaded, so larger images are refused from their header; the decoded size is
// checked against it too.
Image decode_with_opencv(const uint8_t* data, size_t size, ImageFormat format, const std::string& name, int64_t max_pixels);

// A video's frames in order, through FFmpeg (OpenCV's cv::VideoCapture), as RGB.
class VideoReader {
 public:
  struct Frame {
    int64_t index;  // 0 for the first
    double time_s;  // presentation time
  };
  // Throws vit::Error when the file cannot be opened as a video (FFmpeg's reason in the message).
  VideoReader(const std::string& path, int64_t max_pixels);
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  // Moves to the next frame (decoding it, without converting its pixels); false at the end.
  bool grab(Frame* frame);
  // The frame grabbed last, as RGB; throws vit::Error.
  Image retrieve();
  // Whether FFmpeg reported an error while reading the frame grabbed last: its pixels cannot be trusted.
  bool frame_damaged() const;
  // What FFmpeg reported while reading (its first few errors and warnings), "" when nothing.
  std::string problem() const;
  // The frame count the container announces (an estimate for some formats; 0 when it gives none).
  int64_t announced_frames() const;

 private:
  std::string path_;
  int64_t max_pixels_;
  const VitCvVideoApi* api_;  // the video plugin's table
  void* video_ = nullptr;
};

}  // namespace vit
