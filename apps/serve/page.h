// The web page GET / answers (apps/serve/page.html, compiled into the binary by CMake: no file is read at
// run time and the page fetches nothing from outside).
#pragma once

namespace vit::app {

const char* page_html();

}  // namespace vit::app
