// What both OpenCV plugins (opencv_plugin.h) share: reporting an error through the C interface, and
// OpenCV's exception text cut down to its reason.
#pragma once
#include <cstdio>
#include <string>

namespace vit::cv_plugin {

inline void set_error(char* err, size_t n, const std::string& msg) {
  if (n == 0) return;
  std::snprintf(err, n, "%s", msg.c_str());
}

// "imdecode_(''): can't read data: OpenCV(4.6.0) ./modules/...: error: (-2:Unspecified error) OpenCV TIFF:
// failed TIFFReadRGBAStrip(...) in function 'readData'" -> "OpenCV TIFF: failed TIFFReadRGBAStrip(...)".
inline std::string reason_from_opencv(std::string text) {
  const size_t err = text.find("error: (");
  if (err != std::string::npos) {
    const size_t close = text.find(") ", err);
    if (close != std::string::npos) text = text.substr(close + 2);
  }
  const size_t fn = text.find(" in function");
  if (fn != std::string::npos) text = text.substr(0, fn);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace vit::cv_plugin
