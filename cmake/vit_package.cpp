// Compiled into each program that links the installed vit::vit (vitConfig.cmake adds it): tells the
// engine, a static library that cannot find itself at run time, where this package's OpenCV plugins are,
// wherever the package was installed or moved to before the program was built.
// Weak: a program whose several targets link vit::vit gets one copy, whichever the linker keeps.
extern "C" __attribute__((weak)) const char vit_package_plugin_dir[] = VIT_PACKAGE_PLUGIN_DIR;
