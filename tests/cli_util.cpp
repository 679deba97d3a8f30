// See cli_util.h.
#include "cli_util.h"

#include <sys/wait.h>

#include <cstdlib>
#include <sstream>

#include <stb/stb_image_write.h>  // implementation: stb_image_write.cpp

namespace vit::test {

Result run_vit(const std::string& args) { return run_vit_env("", args); }

Result run_vit_env(const std::string& env, const std::string& args) {
  TempDir d;
  const std::string cmd = env + VIT_BINARY + " " + args + " >" + d.file("out") + " 2>" + d.file("err");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(d.file("out")), read_file(d.file("err"))};
}

std::vector<nlohmann::json> json_lines(const std::string& s) {
  std::vector<nlohmann::json> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

void Cli::SetUp() {
  write_tiny_model(model_.path(), TinySpec{});
  std::vector<uint8_t> px(size_t(40) * 30 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 13 % 256);
  ASSERT_TRUE(stbi_write_jpg(images_.file("a.jpg").c_str(), 40, 30, 3, px.data(), 90));
  ASSERT_TRUE(stbi_write_png(images_.file("b.PNG").c_str(), 30, 40, 3, px.data(), 30 * 3));
  ASSERT_TRUE(stbi_write_bmp(images_.file("c.bmp").c_str(), 40, 30, 3, px.data()));
  write_file(images_.file("d_broken.jpg"), "not a jpeg at all");
  write_file(images_.file("notes.txt"), "ignored: not an image extension");
}

}  // namespace vit::test
