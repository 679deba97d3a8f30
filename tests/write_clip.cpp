// write_clip OUT.mkv FPS IMAGE...: a lossless video (FFV1 in Matroska) with one frame per image, for the
// Python and Spark tests, which have no video writer of their own. All images must have the same size.
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: write_clip OUT.mkv FPS IMAGE...\n");
    return 2;
  }
  cv::VideoWriter writer;
  for (int i = 3; i < argc; ++i) {
    const cv::Mat frame = cv::imread(argv[i], cv::IMREAD_COLOR);
    if (frame.empty()) {
      std::fprintf(stderr, "write_clip: cannot read %s\n", argv[i]);
      return 1;
    }
    if (!writer.isOpened() && !writer.open(argv[1], cv::CAP_FFMPEG, cv::VideoWriter::fourcc('F', 'F', 'V', '1'),
                                           std::atof(argv[2]), frame.size())) {
      std::fprintf(stderr, "write_clip: cannot write %s\n", argv[1]);
      return 1;
    }
    writer.write(frame);
  }
  return 0;
}
