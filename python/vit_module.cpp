// The Python module `vit._vit` (the package `vit`): vit::Classifier (include/vit/vit.h) with numpy arrays for tensors and dicts
// shaped like `vit classify --json` lines. Arguments are checked and copied while the GIL is held; the
// engine then decodes and runs with it released, so Python threads can share one Classifier, and takes
// it back between batches to run Python's signal handlers, so Ctrl-C ends a long call within a batch.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "vit/batcher.h"
#include "vit/load_options.h"
#include "vit/text.h"
#include "vit/vit.h"

namespace py = pybind11;

namespace {

// Paths cross as the file system's bytes (os.fsencode / os.fsdecode), so a name that is not valid
// UTF-8 goes in and comes back unchanged. Engine messages and labels carry such names too.
std::string fs_bytes(const py::handle& s) {
  py::object b = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(s.ptr()));
  if (!b) throw py::error_already_set();
  return std::string(PyBytes_AS_STRING(b.ptr()), size_t(PyBytes_GET_SIZE(b.ptr())));
}

py::str fs_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeFSDefaultAndSize(s.data(), Py_ssize_t(s.size()));
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// The engine's messages name the CLI's flags where a setting is wrong ("--img-size does not apply to ..."); to a
// Python caller each is the keyword argument that sets it. A flag counts where it stands alone (first, or after
// a space or parenthesis; not followed by more of a name), so a file named --img-size.jpg keeps its name; flags
// without a keyword stay.
std::string python_words(const std::string& message) {
  // The model-wide options' flags and keywords from their table, and the Classifier's own settings'.
  static const std::map<std::string, std::string> kKeywords = [] {
    std::map<std::string, std::string> k = {
        {"max-pixels", "max_pixels"}, {"batch", "batch"}, {"pool", "pool"}, {"exif-transpose", "exif_transpose"}};
    for (const vit::LoadOption& o : vit::load_option_table()) k[vit::option_flag(o).substr(2)] = o.name;
    return k;
  }();
  static const std::regex flag(R"((^|[ (])--([a-z][a-z0-9-]*)(?![\w./-]))");
  std::string out;
  auto copied = message.cbegin();
  for (std::sregex_iterator it(message.cbegin(), message.cend(), flag), end; it != end; ++it) {
    const auto keyword = kKeywords.find((*it)[2].str());
    if (keyword == kKeywords.end()) continue;
    out.append(copied, (*it)[2].first - 2);  // up to the flag's "--"
    out += keyword->second;
    copied = (*it)[2].second;
  }
  return out.append(copied, message.cend());
}

std::string type_name(const py::handle& h) { return py::str(py::type::handle_of(h).attr("__name__")); }

// A str, bytes or os.PathLike (pathlib.Path) as a path, as os.fsdecode takes them; bytes are the file
// system's own. `what` names the argument in the error.
std::string path_arg(const py::handle& h, const std::string& what) {
  if (!py::isinstance<py::str>(h) && !py::isinstance<py::bytes>(h) && !py::hasattr(h, "__fspath__"))
    throw py::type_error(what + " must be a str, bytes or os.PathLike, got " + type_name(h));
  py::object s = py::module_::import("os").attr("fspath")(h);
  if (py::isinstance<py::bytes>(s)) return std::string(PyBytes_AS_STRING(s.ptr()), size_t(PyBytes_GET_SIZE(s.ptr())));
  if (!py::isinstance<py::str>(s)) throw py::type_error(what + " must give a str or bytes path, got " + type_name(s));
  return fs_bytes(s);
}

// The items of a list-like argument; a lone str or bytes (a common slip for [path]) is refused.
std::vector<py::object> items(const py::handle& seq, const std::string& what) {
  if (py::isinstance<py::str>(seq) || py::isinstance<py::bytes>(seq) || !py::isinstance<py::iterable>(seq))
    throw py::type_error(what + " must be a list, got " + type_name(seq) +
                         (py::isinstance<py::str>(seq) ? " (for one file, pass [path])" : ""));
  std::vector<py::object> out;  // owned: a generator's items live only as long as we hold them
  for (py::handle h : seq) out.push_back(py::reinterpret_borrow<py::object>(h));
  return out;
}

void check_topk(int topk) {
  if (topk < 1) throw py::value_error("topk must be at least 1, got " + std::to_string(topk));
}

std::string shape_text(const std::vector<py::ssize_t>& shape) {
  std::string s;
  for (py::ssize_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

// Every array the engine hands to Python goes through here: its floats must fill the shape exactly, or
// the call fails rather than hand over memory that was never written (or drop what was).
py::array_t<float> to_array(const std::vector<float>& v, std::vector<py::ssize_t> shape) {
  size_t size = 1;
  for (py::ssize_t d : shape) size *= size_t(d);
  if (v.size() != size)
    throw vit::Error("internal: the engine gave " + std::to_string(v.size()) + " floats for an array of shape " +
                     shape_text(shape));
  py::array_t<float> a(std::move(shape));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
  return a;
}

// One (name, bytes or bytearray) pair, an encoded image file in memory; `item` names it in errors.
std::pair<std::string, std::string> encoded_item(const py::handle& h, const std::string& item) {
  if (!(py::isinstance<py::tuple>(h) || py::isinstance<py::list>(h)) || py::len(h) != 2)
    throw py::type_error(item + " must be a (name, bytes) pair, got " + type_name(h));
  const py::object name = h[py::int_(0)], data = h[py::int_(1)];
  std::string bytes;
  if (py::isinstance<py::bytes>(data)) {
    bytes.assign(PyBytes_AS_STRING(data.ptr()), size_t(PyBytes_GET_SIZE(data.ptr())));
  } else if (PyByteArray_Check(data.ptr())) {
    bytes.assign(PyByteArray_AS_STRING(data.ptr()), size_t(PyByteArray_GET_SIZE(data.ptr())));
  } else {
    throw py::type_error(item + ": the image must be bytes or bytearray, got " + type_name(data));
  }
  return {path_arg(name, item + ": the name"), std::move(bytes)};
}

// ---- Images in memory: PIL images and numpy uint8 arrays, handed to the engine as decoded 8-bit RGB.

// The images of one call, each with its place among the answers: files for the engine to read, encoded
// files in memory, or decoded pixels; an image whose pixels PIL could not read fails alone.
struct Inputs {
  size_t size = 0;
  std::vector<std::string> paths;
  std::vector<size_t> path_at;
  std::vector<std::pair<std::string, std::string>> encoded;
  std::vector<size_t> encoded_at;
  std::vector<vit::Pixels> pixels;
  std::vector<size_t> pixels_at;
  std::vector<std::pair<size_t, std::pair<std::string, std::string>>> failed;  // place, (name, error)
  std::vector<py::object> arrays;  // the C-contiguous arrays pixels point into, kept alive
  std::deque<std::string> copies;  // or the pixels made here (a deque: its strings never move)

  void add_pixels(std::string name, int64_t width, int64_t height, const uint8_t* rgb) {
    pixels.push_back({std::move(name), int(width), int(height), rgb});
    pixels_at.push_back(size++);
  }
};

const char* const kImageKinds = "a PIL.Image.Image or a numpy uint8 array [H, W, 3] RGB ([N, H, W, 3] for several)";

bool is_pil_image(const py::handle& h) {
  PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), "PIL.Image");  // only if a program imported it
  if (!module) return false;
  return py::isinstance(h, py::reinterpret_borrow<py::object>(module).attr("Image"));
}

// A numpy uint8 array [H, W, 3] (one image, "<array I>") or [N, H, W, 3] (N of one size, "<array I[J]>"),
// RGB (whether it is OpenCV's BGR cannot be told from its values); any strides, read-only or not.
void add_array(Inputs& in, const py::handle& h, size_t index, const std::string& item) {
  py::array a = py::reinterpret_borrow<py::array>(h);
  const std::string want = std::string(" must be ") + kImageKinds;
  if (a.dtype().kind() != 'u' || a.itemsize() != 1)
    throw py::value_error(item + want + ", got dtype " + std::string(py::str(a.dtype())) +
                          (a.dtype().kind() == 'f' ? " (floats: scale to 0..255 and .astype(numpy.uint8))" : ""));
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  const bool one = a.ndim() == 3 && shape[2] == 3, several = a.ndim() == 4 && shape[3] == 3;
  if (!one && !several)
    throw py::value_error(item + want + ", got shape " + shape_text(shape) +
                          (a.ndim() == 2 ? " (grey: numpy.stack([a] * 3, axis=-1))" : ""));
  const py::ssize_t n = several ? shape[0] : 1, h_ = shape[a.ndim() - 3], w = shape[a.ndim() - 2];
  if (h_ > INT32_MAX || w > INT32_MAX) throw py::value_error(item + ": an image of " + shape_text(shape) + " is too large");
  if (!(a.flags() & py::array::c_style)) a = py::module_::import("numpy").attr("ascontiguousarray")(a);
  in.arrays.push_back(a);
  const auto* rgb = static_cast<const uint8_t*>(a.data());
  const std::string name = "<array " + std::to_string(index);
  for (py::ssize_t j = 0; j < n; ++j)
    in.add_pixels(several ? name + "[" + std::to_string(j) + "]>" : name + ">", w, h_, rgb + size_t(j) * size_t(h_ * w * 3));
}

std::string bytes_of(const py::object& b) { return std::string(PyBytes_AS_STRING(b.ptr()), size_t(PyBytes_GET_SIZE(b.ptr()))); }

// A PIL image as img.convert("RGB") gives it, named by its filename where it has one, else "<image I>".
// 16-bit grey (I;16, I;16L, I;16B, I;16N) keeps each value's high byte, as the engine reads a 16-bit grey
// PNG file (where PIL's convert clips at 255); 32-bit integer and float modes (I, F) are refused, their
// range unknown.
void add_pil(Inputs& in, const py::handle& img, size_t index, const std::string& item) {
  const std::string mode = py::str(img.attr("mode"));
  std::string name = "<image " + std::to_string(index) + ">";
  const py::object filename = py::getattr(img, "filename", py::none());
  if ((py::isinstance<py::str>(filename) || py::isinstance<py::bytes>(filename)) && py::len(filename) > 0)
    name = path_arg(filename, item + ": its filename");
  if (mode == "I" || mode == "F")
    throw py::value_error(item + ": a PIL image of mode " + mode + " (32-bit " + (mode == "I" ? "integers" : "floats") +
                          "): which 8 bits to keep is not known; convert it first (img.convert('RGB') clips at 255)");
  try {
    img.attr("load")();  // reads a lazily opened file: a broken one fails here, alone
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt and the like end the call
    in.failed.push_back({in.size++, {name, std::string(py::str(e.type().attr("__name__"))) + ": " + py::str(e.value()).cast<std::string>()}});
    return;
  }
  const auto [w, h] = img.attr("size").cast<std::pair<int64_t, int64_t>>();
  const size_t count = size_t(w) * size_t(h);
  std::string rgb;
  if (mode.rfind("I;16", 0) == 0) {
    const std::string raw = bytes_of(img.attr("tobytes")());
    if (raw.size() != 2 * count) throw vit::Error("internal: " + item + ": " + std::to_string(raw.size()) + " bytes of mode " + mode);
    const size_t high = mode == "I;16B" ? 0 : 1;  // I;16, I;16L and (on this CPU) I;16N are little-endian
    rgb.resize(3 * count);
    for (size_t k = 0; k < count; ++k) rgb[3 * k] = rgb[3 * k + 1] = rgb[3 * k + 2] = raw[2 * k + high];
  } else {
    py::object converted = mode == "RGB" ? py::reinterpret_borrow<py::object>(img) : py::object();
    if (!converted) {
      try {
        converted = img.attr("convert")("RGB");
      } catch (py::error_already_set& e) {
        if (!e.matches(PyExc_ValueError)) throw;
        throw py::value_error(item + ": PIL cannot convert a " + mode + " image to RGB: " + py::str(e.value()).cast<std::string>());
      }
    }
    rgb = bytes_of(converted.attr("tobytes")());
    if (rgb.size() != 3 * count) throw vit::Error("internal: " + item + ": " + std::to_string(rgb.size()) + " bytes of RGB");
  }
  in.copies.push_back(std::move(rgb));
  in.add_pixels(std::move(name), w, h, reinterpret_cast<const uint8_t*>(in.copies.back().data()));
}

// Bytes (or a bytearray) holding a NUL byte, where a path is expected, are no path the file system has:
// most likely an encoded image file read into memory, which the call's _encoded form takes. `what` is
// "classify: paths" or "embed: paths".
void refuse_encoded_image(const py::handle& h, const std::string& what, const std::string& item) {
  const bool array = PyByteArray_Check(h.ptr());
  if (!py::isinstance<py::bytes>(h) && !array) return;
  const std::string bytes = array ? std::string(PyByteArray_AS_STRING(h.ptr()), size_t(PyByteArray_GET_SIZE(h.ptr())))
                                  : bytes_of(py::reinterpret_borrow<py::object>(h));
  if (bytes.find('\0') == std::string::npos) return;  // a path given as bytes (or a bytearray, refused as a type)
  const std::string call = what.substr(0, what.find(':'));
  if (vit::read_image_header(bytes).image)
    throw py::value_error(item + ": the bytes of an encoded image file, not a path: pass encoded images as (name, bytes) "
                          "pairs to " + call + "_encoded([(name, data)])");
  throw py::value_error(item + ": bytes with a NUL byte are no path (an image file's bytes go to " + call +
                        "_encoded as (name, bytes) pairs)");
}

// The items of a list for classify() and embed() (paths and images in memory) or the Batcher's (encoded
// pairs and images in memory). `what` names the argument in errors.
Inputs inputs_of(const py::handle& seq, const std::string& what, bool pairs) {
  Inputs in;
  size_t index = 0;
  for (const py::object& h : items(seq, what)) {
    const std::string item = what + "[" + std::to_string(index) + "]";
    if (py::isinstance<py::array>(h)) {
      add_array(in, h, index, item);
    } else if (is_pil_image(h)) {
      add_pil(in, h, index, item);
    } else if (pairs) {
      if (!(py::isinstance<py::tuple>(h) || py::isinstance<py::list>(h)))
        throw py::type_error(item + " must be a (name, bytes) pair, " + kImageKinds + ", got " + type_name(h));
      in.encoded.push_back(encoded_item(h, item));
      in.encoded_at.push_back(in.size++);
    } else {
      refuse_encoded_image(h, what, item);
      if (!py::isinstance<py::str>(h) && !py::isinstance<py::bytes>(h) && !py::hasattr(h, "__fspath__"))
        throw py::type_error(item + " must be a str, bytes or os.PathLike, got " + type_name(h) + " (or an image in memory: " +
                             kImageKinds + ")");
      in.paths.push_back(path_arg(h, item));
      in.path_at.push_back(in.size++);
    }
    ++index;
  }
  return in;
}

// Moves a call's answers into their places.
template <typename T>
void place(std::vector<T>&& got, const std::vector<size_t>& at, std::vector<T>& out) {
  if (got.size() != at.size())
    throw vit::Error("internal: " + std::to_string(got.size()) + " answers for " + std::to_string(at.size()) + " inputs");
  for (size_t k = 0; k < got.size(); ++k) out[at[k]] = std::move(got[k]);
}

template <typename T>
void place_failed(const Inputs& in, std::vector<T>& out) {
  for (const auto& [at, f] : in.failed) {
    out[at].file = f.first;
    out[at].error = f.second;
  }
}

// One Result as a `vit classify --json` line: {"file", "top": [{"index", "label", "prob"}]} or {"file", "error"}.
py::list to_dicts(const std::vector<vit::Result>& results) {
  py::list out;
  for (const vit::Result& r : results) {
    py::dict d;
    d["file"] = fs_str(r.file);
    if (r.frame >= 0) {
      d["frame"] = r.frame;
      d["time_s"] = r.time_s;
    }
    if (!r.error.empty()) {
      d["error"] = fs_str(python_words(r.error));
    } else {
      py::list top;
      for (const vit::Prediction& p : r.top) {
        py::dict t;
        t["index"] = p.index;
        t["label"] = fs_str(p.label);
        t["prob"] = double(p.prob);
        top.append(std::move(t));
      }
      d["top"] = std::move(top);
    }
    out.append(std::move(d));
  }
  return out;
}

// Runs call(between) with the GIL released. Signals reach Python's C handler between forward passes
// (the engine holds them back while one runs), which only notes them; between batches the hook takes
// the GIL back and runs the Python handlers (PyErr_CheckSignals, a no-op off the main thread). An
// exception from one (KeyboardInterrupt from Ctrl-C) stops the call and is raised here; the Classifier
// stays usable.
template <typename Call>
auto interruptible(const Call& call) {
  std::unique_ptr<py::error_already_set> raised;
  const vit::BetweenBatches between = [&raised] {
    py::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() == 0) return true;
    raised = std::make_unique<py::error_already_set>();  // takes the pending exception
    return false;
  };
  try {
    py::gil_scoped_release unlocked;
    return call(between);
  } catch (const vit::Interrupted&) {
    if (raised) throw py::error_already_set(*raised);
    throw;
  }
}

// A keyword argument as pybind11 converts a typed one (an int takes what has __index__, not a float), or TypeError
// naming it.
template <typename T>
T cast_arg(const py::handle& value, const std::string& name, const char* kind) {
  try {
    return py::cast<T>(value);
  } catch (const py::cast_error&) {
    throw py::type_error(name + " must be " + kind + ", got " + type_name(value));
  }
}

// A model-wide option's keyword argument (vit/load_options.h) into the options: an int (its range is checked on
// loading, in the library's words), a precision's name, a path (str, bytes or os.PathLike), a name (str) or a
// pool's word; None for a path, a name or a pool is its default, none (the pool: the model's own).
void set_table_arg(vit::LoadOptions* o, const vit::LoadOption& option, const py::handle& value) {
  switch (option.kind) {
    case vit::OptionKind::Number: o->*option.number = cast_arg<int>(value, option.name, "an int"); return;
    case vit::OptionKind::Precision:
      vit::set_load_option(o, option, cast_arg<std::string>(value, option.name, "a str"));
      return;
    case vit::OptionKind::Path:
      if (!value.is_none()) o->*option.text = path_arg(value, option.name);
      return;
    case vit::OptionKind::Name:
      if (value.is_none()) return;
      if (!py::isinstance<py::str>(value))
        throw py::type_error(std::string(option.name) + " must be a str or None, got " + type_name(value));
      o->*option.text = py::cast<std::string>(value);
      if ((o->*option.text).empty())
        throw vit::ArgumentError(std::string(option.name) + " '' names no " + option.what + " (None for none)");
      return;
    case vit::OptionKind::Pool:
      if (value.is_none()) return;
      if (!py::isinstance<py::str>(value))
        throw py::type_error("pool must be a str ('cls', 'token', 'mean', 'avg' or 'map') or None, got " + type_name(value));
      vit::set_load_option(o, option, py::cast<std::string>(value));
      return;
  }
}

// The Classifier's keywords beside the table's: how it runs rather than what is loaded. Each sets its field of
// the options from the argument; its default is ClassifierOptions'.
struct ClassifierArg {
  const char* name;
  const char* python_type;
  void (*set)(vit::ClassifierOptions*, const py::handle&);
  std::string (*dflt)(const vit::ClassifierOptions&);
};
const ClassifierArg kClassifierArgs[] = {
    {"batch", "int", [](vit::ClassifierOptions* o, const py::handle& v) { o->batch = cast_arg<int>(v, "batch", "an int"); },
     [](const vit::ClassifierOptions& o) { return std::to_string(o.batch); }},
    {"max_pixels", "int",
     [](vit::ClassifierOptions* o, const py::handle& v) { o->max_pixels = cast_arg<int64_t>(v, "max_pixels", "an int"); },
     [](const vit::ClassifierOptions& o) { return std::to_string(o.max_pixels); }},
    {"exif_transpose", "bool",
     [](vit::ClassifierOptions* o, const py::handle& v) { o->exif_transpose = cast_arg<bool>(v, "exif_transpose", "a bool"); },
     [](const vit::ClassifierOptions& o) { return std::string(o.exif_transpose ? "True" : "False"); }},
};

// Classifier(model, **options): every keyword is the table's or the Classifier's own; another is a TypeError, as
// Python names it.
vit::Classifier make_classifier(const py::object& model, const py::kwargs& kwargs) {
  vit::ClassifierOptions o;
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::cast<std::string>(key);
    const auto row = std::find_if(vit::load_option_table().begin(), vit::load_option_table().end(),
                                  [&](const vit::LoadOption& t) { return name == t.name; });
    const auto own = std::find_if(std::begin(kClassifierArgs), std::end(kClassifierArgs),
                                  [&](const ClassifierArg& a) { return name == a.name; });
    if (row != vit::load_option_table().end()) set_table_arg(&o, *row, value);
    else if (own != std::end(kClassifierArgs)) own->set(&o, value);
    else throw py::type_error("Classifier() got an unexpected keyword argument '" + name + "'");
  }
  // More threads than cores: the engine uses the cores, and says so through Python's warnings, which a
  // program can filter or turn into errors (the engine's own log line would bypass them).
  const int cores = omp_get_num_procs();
  if (o.threads > cores) {
    const std::string why = std::to_string(o.threads) + " threads asked for, but this machine has " +
                            std::to_string(cores) + " cores: using " + std::to_string(cores);
    if (PyErr_WarnEx(PyExc_RuntimeWarning, why.c_str(), 1) != 0) throw py::error_already_set();
    o.threads = cores;
  }
  const std::string path = path_arg(model, "model");
  py::gil_scoped_release unlocked;  // loading reads and reorders all the weights
  return vit::Classifier(path, o);
}

// A model-wide option as Python sees it: its keyword's type and its default's repr.
std::pair<std::string, std::string> python_type_and_default(const vit::LoadOption& option) {
  switch (option.kind) {
    case vit::OptionKind::Number: return {"int", vit::load_option_value(vit::LoadOptions{}, option)};
    case vit::OptionKind::Precision: return {"str", "'" + vit::load_option_value(vit::LoadOptions{}, option) + "'"};
    case vit::OptionKind::Path:
    case vit::OptionKind::Name:
    case vit::OptionKind::Pool: break;
  }
  return {"object", "None"};
}

// The model-wide options of the table, for programs that pass them on (the Spark job's flags): one dict each.
py::list model_options() {
  py::list out;
  for (const vit::LoadOption& option : vit::load_option_table()) {
    static const char* const kKinds[] = {"int", "path", "name", "precision", "pool"};
    py::dict d;
    d["name"] = option.name;
    d["flag"] = vit::option_flag(option);
    d["type"] = kKinds[int(option.kind)];
    d["default"] = option.kind == vit::OptionKind::Number ? py::object(py::int_(vit::LoadOptions{}.*option.number))
                 : option.kind == vit::OptionKind::Precision ? py::object(py::str("f32"))
                                                             : py::object(py::none());
    d["min"] = option.kind == vit::OptionKind::Number ? py::object(py::int_(option.lo)) : py::object(py::none());
    d["max"] = option.kind == vit::OptionKind::Number ? py::object(py::int_(option.hi)) : py::object(py::none());
    d["zero"] = option.kind == vit::OptionKind::Number ? py::object(py::str(option.zero)) : py::object(py::none());
    const std::vector<std::string>& choices = vit::option_choices(option);
    d["choices"] = choices.empty() ? py::object(py::none()) : py::object(py::tuple(py::cast(choices)));
    d["help"] = option.help;
    out.append(d);
  }
  return out;
}

// Classifier()'s signature and docstring, its keywords from the table and the Classifier's own, as pybind11 would
// write them for a function that named each.
std::string classifier_init_doc(const std::string& about) {
  std::string signature = "__init__(self: vit._vit.Classifier, model: object, *", help;
  for (const vit::LoadOption& option : vit::load_option_table()) {
    const auto [type, dflt] = python_type_and_default(option);
    signature += std::string(", ") + option.name + ": " + type + " = " + dflt;
    help += std::string(option.name) + ": " + option.help + ".\n";
  }
  const vit::ClassifierOptions defaults;
  for (const ClassifierArg& a : kClassifierArgs)
    signature += std::string(", ") + a.name + ": " + a.python_type + " = " + a.dflt(defaults);
  return signature + ") -> None\n\n" + about + help;
}

py::list classify(const vit::Classifier& c, const py::object& paths, int topk) {
  check_topk(topk);
  Inputs in = inputs_of(paths, "classify: paths", false);
  std::vector<vit::Result> out(in.size);
  interruptible([&](const vit::BetweenBatches& between) {
    place(c.classify(in.paths, topk, between), in.path_at, out);  // even none: a model without a head says so
    if (!in.pixels.empty()) place(c.classify_pixels(in.pixels, topk, between), in.pixels_at, out);
    return 0;
  });
  place_failed(in, out);
  return to_dicts(out);
}

// every=N takes every Nth frame, fps one frame per 1/fps seconds (1 when neither is given): one or the
// other, as the CLI's --every and --fps.
vit::VideoSampling sampling_arg(const std::string& where, int every, const std::optional<double>& fps) {
  if (every < 0) throw py::value_error(where + ": every must be 1 or more (0: sample by fps), got " + std::to_string(every));
  if (every > 0 && fps)
    throw py::value_error(where + ": every and fps exclude each other (every=" + std::to_string(every) +
                          ": every Nth frame; fps: frames per second of video), got both");
  const double rate = fps.value_or(1.0);
  if (every == 0 && !(rate > 0 && std::isfinite(rate)))
    throw py::value_error(where + ": fps must be a positive number, got " + std::to_string(rate));
  return {every, rate};
}

// A video's sampled frames -> one dict per frame (with 'frame' and 'time_s'), then one {'file', 'error'}
// when the video could not be opened or stopped early.
py::list classify_video(const vit::Classifier& c, const py::object& path, int every, const std::optional<double>& fps,
                        int topk) {
  check_topk(topk);
  const vit::VideoSampling sampling = sampling_arg("classify_video", every, fps);
  const std::string p = path_arg(path, "classify_video: path");
  std::vector<vit::Result> all;
  interruptible([&](const vit::BetweenBatches& between) {
    return c.classify_video(p, sampling, [&](const std::vector<vit::Result>& batch) {
      all.insert(all.end(), batch.begin(), batch.end());
    }, topk, between);
  });
  return to_dicts(all);
}

// A list of (name, bytes or bytearray) pairs as the library takes them; `what` names the argument.
std::vector<std::pair<std::string, std::string>> encoded_items(const py::handle& images, const std::string& what) {
  std::vector<std::pair<std::string, std::string>> in;
  for (const py::object& h : items(images, what)) in.push_back(encoded_item(h, what + "[" + std::to_string(in.size()) + "]"));
  return in;
}

py::list classify_encoded(const vit::Classifier& c, const py::object& images, int topk) {
  check_topk(topk);
  const std::vector<std::pair<std::string, std::string>> in = encoded_items(images, "classify_encoded: images");
  return to_dicts(interruptible([&](const vit::BetweenBatches& between) { return c.classify_encoded(in, topk, between); }));
}

// vit.Batcher: classify_encoded calls from many Python threads, run together as vit::Batcher batches.
struct PyBatcher {
  py::object classifier;  // keeps the Classifier alive while the Batcher uses it
  std::unique_ptr<vit::Batcher> batcher;
  std::unique_ptr<std::atomic<bool>> closed = std::make_unique<std::atomic<bool>>(false);  // close() was called

  // Why a request was refused: the queue full, or the Batcher closed.
  std::runtime_error refused(const std::string& what) const {
    if (*closed) return std::runtime_error(what + ": the Batcher is closed (close() was called): it takes no new calls");
    return std::runtime_error(what + ": the queue is full (max_queue images waiting): try again when it drains, or "
                              "make the Batcher with a larger max_queue");
  }
};

// Queues the encoded and the decoded images of `in` as (at most) two requests, waits for both answers with
// the GIL released, and puts them in their places. A request of them asks `output` with `embed`, Result or
// Embedding items as `Item` says, at most `topk` classes.
template <typename Item>
std::vector<Item> wait_for(const PyBatcher& pb, Inputs& in, const std::string& what, vit::Output output, int topk,
                           const vit::EmbedOptions& embed) {
  std::vector<Item> out(in.size);
  {
    py::gil_scoped_release unlocked;  // the batching thread never takes the GIL
    std::promise<std::vector<Item>> encoded, decoded;
    std::future<std::vector<Item>> got_encoded = encoded.get_future(), got_decoded = decoded.get_future();
    const auto submit = [&](vit::Request r, std::promise<std::vector<Item>>& got) {
      return pb.batcher->submit(std::move(r).with_topk(topk).with_embed(embed), [&got](vit::Answer a) {
        if constexpr (std::is_same_v<Item, vit::Result>) got.set_value(std::move(a.results));
        else got.set_value(std::move(a.embeddings));
      });
    };
    bool queued = true;
    if (!in.encoded_at.empty()) queued = submit(vit::Request::of_images(std::move(in.encoded), output), encoded);
    const bool encoded_queued = queued && !in.encoded_at.empty();
    if (queued && !in.pixels.empty()) queued = submit(vit::Request::of_images(in.pixels, output), decoded);
    if (encoded_queued) place(got_encoded.get(), in.encoded_at, out);  // even when the second was refused
    if (!queued) throw pb.refused(what);
    if (!in.pixels.empty()) place(got_decoded.get(), in.pixels_at, out);
  }
  place_failed(in, out);
  return out;
}

py::list batcher_classify(PyBatcher& pb, Inputs in, int topk, const std::string& what) {
  check_topk(topk);
  if (in.size == 0) return py::list();
  return to_dicts(wait_for<vit::Result>(pb, in, what, vit::Output::Top, topk, {}));
}

py::list batcher_classify_encoded(PyBatcher& pb, const py::object& images, int topk) {
  check_topk(topk);
  Inputs in;
  in.encoded = encoded_items(images, "classify_encoded: images");
  for (size_t i = 0; i < in.encoded.size(); ++i) in.encoded_at.push_back(in.size++);
  return batcher_classify(pb, std::move(in), topk, "Batcher.classify_encoded");
}

// A NaFlex model takes images at their own shape, as patches: no fixed [3, H, W] tensor is its input.
void refuse_naflex(const vit::ModelInfo& m, const char* what) {
  if (m.max_patches)
    throw py::value_error(std::string(what) + ": " + m.name + " is a NaFlex model (" + m.family +
                          "): it takes each image at its own aspect ratio as patches within a budget, not a fixed "
                          "[B, 3, H, W] tensor; give it image files or images in memory (classify, embed)");
}

py::array_t<float> logits(const vit::Classifier& c, const py::object& images) {
  const vit::ModelInfo m = c.info();
  refuse_naflex(m, "logits");
  const std::string want = "float32 [B, 3, " + std::to_string(m.input_height) + ", " + std::to_string(m.input_width) + "]";
  if (!py::isinstance<py::array>(images))
    throw py::type_error("logits: images must be a numpy.ndarray " + want + ", got " + type_name(images));
  const py::array a = py::reinterpret_borrow<py::array>(images);
  if (!py::isinstance<py::array_t<float>>(a))
    throw py::value_error("logits: images must be " + want + ", got dtype " + std::string(py::str(a.dtype())) +
                          " (images.astype(numpy.float32) converts)");
  std::string got;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) got += (i ? ", " : "") + std::to_string(a.shape(i));
  if (a.ndim() != 4 || a.shape(1) != 3 || a.shape(2) != m.input_height || a.shape(3) != m.input_width)
    throw py::value_error("logits: images must be " + want + ", got shape [" + got + "]");
  if (!(a.flags() & py::array::c_style))
    throw py::value_error("logits: images must be C-contiguous (numpy.ascontiguousarray(images) makes a copy that is)");
  const float* data = static_cast<const float*>(a.data());
  const int64_t n = a.shape(0);
  // `a` keeps the pixels alive while the GIL is released.
  const std::vector<float> out = interruptible([&](const vit::BetweenBatches& between) { return c.logits(data, n, between); });
  return to_array(out, {py::ssize_t(n), py::ssize_t(c.logits_size())});
}

py::array_t<float> preprocess(const vit::Classifier& c, const py::object& path) {
  const std::string p = path_arg(path, "preprocess: path");
  const vit::ModelInfo m = c.info();
  refuse_naflex(m, "preprocess");
  std::vector<float> out;
  {
    py::gil_scoped_release unlocked;
    out = c.preprocess(p);
  }
  return to_array(out, {3, py::ssize_t(m.input_height), py::ssize_t(m.input_width)});
}

// vit::find_images: the files `vit classify` would classify for these paths, as dicts {"file"} or
// {"file", "error"}.
py::list find_images(const py::object& paths, bool videos) {
  std::vector<std::string> p;
  for (const py::object& h : items(paths, "find_images: paths"))
    p.push_back(path_arg(h, "find_images: paths[" + std::to_string(p.size()) + "]"));
  std::vector<vit::ImagePath> found;
  {
    py::gil_scoped_release unlocked;  // a large tree takes a while to walk
    found = vit::find_images(p, videos);
  }
  py::list out;
  for (const vit::ImagePath& f : found) {
    py::dict d;
    d["file"] = fs_str(f.file);
    if (!f.error.empty()) d["error"] = fs_str(f.error);
    out.append(std::move(d));
  }
  return out;
}

// Embeddings as `vit embed -o` writes them: the images that worked, in order, and the others' errors.
// Errors carry their input's index, so a caller can put each embedding row back beside its input.
py::dict embed_dict(const vit::Classifier& c, const std::vector<vit::Embedding>& r, const vit::EmbedOptions& o) {
  const bool tokens = o.tokens;
  const int64_t E = c.embedding_size(o), T = c.tokens(), D = c.width();
  std::vector<float> emb, tok;
  py::list files, errors;
  for (const vit::Embedding& e : r) {
    if (!e.error.empty()) {
      py::dict d;
      d["index"] = py::ssize_t(&e - r.data());
      d["file"] = fs_str(e.file);
      d["error"] = fs_str(python_words(e.error));
      errors.append(d);
      continue;
    }
    if (int64_t(e.embedding.size()) != E || (tokens && int64_t(e.tokens.size()) != T * D))
      throw vit::Error("internal: " + e.file + ": an embedding of " + std::to_string(e.embedding.size()) +
                       " floats and tokens of " + std::to_string(e.tokens.size()) + ", expected " + std::to_string(E) +
                       (tokens ? " and " + std::to_string(T * D) : ""));
    files.append(fs_str(e.file));
    emb.insert(emb.end(), e.embedding.begin(), e.embedding.end());
    tok.insert(tok.end(), e.tokens.begin(), e.tokens.end());
  }
  const auto n = py::ssize_t(py::len(files));
  py::dict d;
  d["files"] = files;
  d["embeddings"] = to_array(emb, {n, E});
  if (tokens) d["tokens"] = to_array(tok, {n, T, D});
  d["errors"] = errors;
  return d;
}

py::dict embed(const vit::Classifier& c, const py::handle& paths, bool head, bool tokens, bool normalize, int every,
              const std::optional<double>& fps) {
  const vit::VideoSampling sampling = sampling_arg("embed", every, fps);
  Inputs in = inputs_of(paths, "embed: paths", false);
  const vit::EmbedOptions o{head, tokens, normalize, sampling};
  std::vector<vit::Embedding> out(in.size);
  interruptible([&](const vit::BetweenBatches& between) {
    if (!in.paths.empty()) place(c.embed(in.paths, o, between), in.path_at, out);
    if (!in.pixels.empty()) place(c.embed_pixels(in.pixels, o, between), in.pixels_at, out);
    return 0;
  });
  place_failed(in, out);
  return embed_dict(c, out, o);
}

py::list batcher_classify_images(PyBatcher& pb, const py::object& images, int topk) {
  check_topk(topk);
  return batcher_classify(pb, inputs_of(images, "Batcher.classify: images", true), topk, "Batcher.classify");
}

py::dict batcher_embed(PyBatcher& pb, const py::object& images, bool head, bool tokens, bool normalize) {
  Inputs in = inputs_of(images, "Batcher.embed: images", true);
  const vit::EmbedOptions o{head, tokens, normalize, {}};
  const vit::Classifier& c = pb.classifier.cast<const vit::Classifier&>();
  if (in.size == 0) return embed_dict(c, {}, o);
  return embed_dict(c, wait_for<vit::Embedding>(pb, in, "Batcher.embed", vit::Output::Embedding, 5, o), o);
}

py::dict embed_encoded(const vit::Classifier& c, const py::handle& images, bool head, bool tokens, bool normalize) {
  const auto in = encoded_items(images, "embed_encoded: images");
  const vit::EmbedOptions o{head, tokens, normalize, {}};
  const auto r = interruptible([&](const vit::BetweenBatches& between) { return c.embed_encoded(in, o, between); });
  return embed_dict(c, r, o);
}

// The text tower of a Classifier's model (a CLIP or SigLIP checkpoint), loaded on first use at the Classifier's
// precision and threads and kept on the Python object (its attribute _text_model).
const vit::TextModel& text_model(const py::object& self) {
  if (!py::hasattr(self, "_text_model")) {
    const vit::ModelInfo m = self.cast<const vit::Classifier&>().info();
    vit::TextOptions o;
    o.precision = vit::precision_from_name(m.precision);
    std::unique_ptr<vit::TextModel> t;
    {
      py::gil_scoped_release unlocked;  // loading reads the tower's weights and its tokenizer
      t = std::make_unique<vit::TextModel>(m.file, o);  // threads: the Classifier's, set on this thread at its load
    }
    self.attr("_text_model") = py::capsule(t.release(), [](void* p) { delete static_cast<vit::TextModel*>(p); });
  }
  return *static_cast<const vit::TextModel*>(self.attr("_text_model").cast<py::capsule>().get_pointer());
}

// Classifier.embed_text: a list of str -> float32 [n, E]; a text the tokenizer cannot take is a ValueError naming it.
py::array_t<float> embed_text(const py::object& self, const py::handle& texts, bool normalize) {
  std::vector<std::string> in;
  const std::vector<py::object> list = items(texts, "texts");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = "texts[" + std::to_string(i) + "]";
    if (!py::isinstance<py::str>(list[i])) throw py::type_error(item + " must be a str, got " + type_name(list[i]));
    Py_ssize_t n = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(list[i].ptr(), &n);
    if (!utf8) {
      PyErr_Clear();
      throw py::value_error(item + " cannot be UTF-8 (it holds a lone surrogate)");
    }
    in.emplace_back(utf8, size_t(n));
  }
  const vit::TextModel& t = text_model(self);
  std::vector<vit::TextEmbedding> out;
  {
    py::gil_scoped_release unlocked;
    out = t.embed(in, normalize);
  }
  const int64_t E = t.info().embedding;
  std::vector<float> rows;
  rows.reserve(out.size() * size_t(E));
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].error.empty()) throw py::value_error("texts[" + std::to_string(i) + "]: " + out[i].error);
    rows.insert(rows.end(), out[i].embedding.begin(), out[i].embedding.end());
  }
  return to_array(rows, {py::ssize_t(out.size()), py::ssize_t(E)});
}

// What `vit inspect` prints, as a dict.
py::dict config(const vit::Classifier& c) {
  const vit::ModelInfo m = c.info();
  const std::pair<const char*, py::object> fields[] = {
      {"file", fs_str(m.file)}, {"arch", py::cast(m.arch)}, {"family", py::cast(m.family)},
      {"head", py::cast(vit::head_kind_name(m.head))}, {"stored_as", py::cast(m.stored_as)},
      {"precision", py::cast(m.precision)}, {"patch", py::cast(m.patch)}, {"width", py::cast(m.width)},
      {"depth", py::cast(m.depth)}, {"heads", py::cast(m.heads)}, {"mlp", py::cast(m.mlp)},
      {"classes", py::cast(m.classes)}, {"projection", py::cast(m.projection)}, {"input_size", py::make_tuple(3, m.input_height, m.input_width)},
      {"tokens", py::cast(m.tokens)}, {"parameters", py::cast(m.parameters)}, {"pool", py::cast(m.pool)},
      {"interpolation", py::cast(m.interpolation)}, {"crop_mode", py::cast(m.crop_mode)},
      {"crop_pct", py::cast(m.crop_pct)}, {"resize", py::cast(m.resize)},
      {"mean", py::make_tuple(m.mean[0], m.mean[1], m.mean[2])}, {"std", py::make_tuple(m.std[0], m.std[1], m.std[2])}};
  py::dict d;
  for (const auto& [key, value] : fields) d[key] = value;
  return d;
}

// The one place where C++ errors become Python exceptions (the module's own argument checks raise
// TypeError and ValueError directly):
//   vit::ArgumentError (an option out of range or not suiting the model)  -> ValueError
//   vit::Error (a model, config, labels or text-embeddings file that cannot be used; the engine failing) -> vit.Error
//   py::cast_error (an argument pybind11 could not convert)               -> TypeError
// Messages may name a file that is not UTF-8, hence the file system decoding, and name options by their
// keyword arguments (python_words).
void register_errors(py::module_& m) {
  static py::exception<vit::Error> error(m, "Error", PyExc_RuntimeError);
  error.attr("__module__") = "vit";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const vit::ArgumentError& e) {
      PyErr_SetObject(PyExc_ValueError, fs_str(python_words(e.what())).ptr());
    } catch (const vit::Error& e) {
      PyErr_SetObject(error.ptr(), fs_str(python_words(e.what())).ptr());
    } catch (const py::cast_error& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
}

// The Classifier's embeddings, logits and what it knows of its model.
void bind_classifier_outputs(py::class_<vit::Classifier>& classifier) {
  classifier
      .def("embed", &embed, py::arg("paths"), py::kw_only(), py::arg("head") = false, py::arg("tokens") = false,
           py::arg("normalize") = false, py::arg("every") = 0, py::arg("fps") = py::none(),
           "Image or video files and images in memory (as classify() takes them) -> {'files', 'embeddings':\n"
           "float32 ndarray [n, E], 'tokens': [n, T, D] (tokens=True), 'errors': [{'index', 'file', 'error'}]}\n"
           "('index': the image's place, an [N, H, W, 3] array counting N), as `vit embed -o` writes them: by default\n"
           "timm's forward_head(forward_features(x), pre_logits=True); head=True: model(x); normalize: unit\n"
           "rows. A video's row is the mean over its frames sampled as classify_video samples them (every,\n"
           "fps), normalized after averaging; a video that stops early or is damaged is an error.")
      .def("embed_encoded", &embed_encoded, py::arg("images"), py::kw_only(), py::arg("head") = false,
           py::arg("tokens") = false, py::arg("normalize") = false,
           "Encoded image files in memory, a list of (name, bytes or bytearray) -> a dict as embed() gives.")
      .def("logits", &logits, py::arg("images"),
           "Preprocessed images, a C-contiguous float32 ndarray [B, 3, H, W] -> float32 [B, N]: timm's model(x).\n"
           "A classifier gives its logits (N = classes); a CLIP tower its projection, the image embedding\n"
           "(N = its width; classes is 0); a model without a head (DINOv2, a SigLIP tower) its pooled features,\n"
           "embed()'s rows (N = its width; classes is 0). With text_embeddings: the zero-shot scores\n"
           "(N = classes), logit_scale * cosine similarity + logit_bias, before softmax or sigmoid.")
      .def("embed_text", &embed_text, py::arg("texts"), py::kw_only(), py::arg("normalize") = false,
           "A list of str -> float32 ndarray [n, E]: each text's embedding by the model's text tower (a CLIP or\n"
           "SigLIP checkpoint's: open_clip's encode_text, transformers' get_text_features), in the space of\n"
           "embed(head=True)'s image rows; normalize: unit rows. Each text is tokenized as the checkpoint's own\n"
           "library does and cut to its context (77 tokens for CLIP, 64 for SigLIP) as it cuts. The tower is loaded\n"
           "on the first call, at the Classifier's precision. A model without a text tower, or without its\n"
           "tokenizer's files, raises vit.Error; a text that is empty, holds NUL or cannot be UTF-8 raises\n"
           "ValueError naming it (texts[i]); an item that is not a str, TypeError.")
      .def("preprocess", &preprocess, py::arg("path"),
           "An image file as the model is fed it: float32 ndarray [3, H, W] (timm's eval transform).")
      .def_property_readonly("config", &config, "What the engine understood of the model, as `vit inspect` prints it.")
      .def_property_readonly(
          "labels",
          [](const vit::Classifier& c) {
            py::list out;
            for (const std::string& l : c.labels()) out.append(fs_str(l));
            return out;
          },
          "The class names, a list of str indexed by class: the labels file given, else the checkpoint's own,\n"
          "else ImageNet-1k's for a 1000-class head, else 'class_<i>'.")
      .def_property_readonly("classes", &vit::Classifier::classes,
                             "The number of classes classify() ranks (the length of labels): the head's, or the text\n"
                             "embeddings'; 0 for a model without a classifier head (embeddings only).")
      .def("__repr__", [](const vit::Classifier& c) {
        const vit::ModelInfo m = c.info();
        const std::string what = c.classes() > 0 ? std::to_string(c.classes()) + " classes"
                                                 : "embeddings of " + std::to_string(c.logits_size());
        return py::str("<vit.Classifier {!r}: {}, {}, {}>")
            .format(fs_str(m.file), m.arch.empty() ? "ViT" : m.arch, what, m.precision);
      });
}

void bind_classifier(py::module_& m) {
  const vit::ClassifierOptions defaults;
  py::class_<vit::Classifier> classifier(m, "Classifier", py::dynamic_attr(),
                                        "A ViT image classifier, loaded once. Calls may come from several threads at once.\n\n"
                                        "Signals: while a forward pass runs, the engine's threads hold asynchronous signals back\n"
                                        "(oneDNN's kernels cannot take a signal handler's frame); they are delivered when it ends.\n"
                                        "classify, classify_encoded, classify_video and logits run Python's signal handlers between\n"
                                        "batches, so Ctrl-C raises KeyboardInterrupt within about one batch (from the main thread)\n"
                                        "and the Classifier stays usable. SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP and SIGSYS are\n"
                                        "never held back.");
  {
    py::options signature_written_here;  // classifier_init_doc writes it, the keywords being the table's
    signature_written_here.disable_function_signatures();
    static const std::string init_doc = classifier_init_doc(
        "model: a .safetensors file or the folder holding model.safetensors (and config.json); paths are str,\n"
        "bytes or os.PathLike. Every option is a keyword. Options out of range (or not suiting the model) raise\n"
        "ValueError; more threads than cores warn (RuntimeWarning) and use the cores. A wrong type, or a keyword\n"
        "it does not take, raises TypeError; a model, config, labels or text-embeddings file that cannot be used\n"
        "raises vit.Error (arch: a checkpoint with neither config nor arch; text_embeddings: of another width than\n"
        "the model's image embeddings, or for another kind of model: ValueError). A NaFlex model takes image files\n"
        "and images in memory, not logits()' fixed [B, 3, H, W] tensors nor preprocess() (ValueError), and\n"
        "max_patches for another model is a ValueError.\n"
        "batch: images per forward pass; max_pixels: larger images are refused from their header;\n"
        "exif_transpose: turn images as their EXIF orientation says (PIL's exif_transpose; timm does not);\n"
        "pool: 'cls' (or 'token'), 'mean' (or 'avg') or 'map' to pool the tokens otherwise than the model does\n"
        "(as `vit embed --pool`; a pool the model cannot do, say 'map' without an attention-pool head: ValueError).\n");
    classifier.def(py::init([](const py::object& model, const py::kwargs& options) { return make_classifier(model, options); }),
                   py::arg("model"), init_doc.c_str());
  }
  classifier
      .def("classify", &classify, py::arg("paths"), py::arg("topk") = 5,
           "Image files and images in memory -> one dict per image, in order: {'file', 'top': [{'index', 'label',\n"
           "'prob'}, ...]}, or {'file', 'error'} for one that could not be classified. Each item is a path (str,\n"
           "bytes, os.PathLike), a PIL.Image.Image (as img.convert('RGB') gives it; 16-bit grey I;16 keeps the\n"
           "high byte, as the engine reads 16-bit grey files; modes I and F are refused) or a numpy uint8 array\n"
           "[H, W, 3] in RGB order (OpenCV's BGR must be turned: a[..., ::-1]), or [N, H, W, 3] for N images;\n"
           "their 'file' is the PIL image's filename where it has one, else '<image I>', '<array I>' or\n"
           "'<array I[J]>' (I: the item's place in the list). Images in memory are never turned by EXIF.")
      .def("classify_video", &classify_video, py::arg("path"), py::kw_only(), py::arg("every") = 0, py::arg("fps") = py::none(),
           py::arg("topk") = 5,
           "A video file -> one dict per sampled frame, in order: {'file', 'frame', 'time_s', 'top'}; every=N:\n"
           "every Nth frame, else fps: one per 1/fps seconds of video (default 1; not both, as the CLI's --every\n"
           "and --fps: ValueError). A video that cannot be opened, or stops\n"
           "early, ends the list with {'file', 'error'} after the frames that were read.")
      .def("classify_encoded", &classify_encoded, py::arg("images"), py::arg("topk") = 5,
           "Encoded image files in memory, a list of (name, bytes or bytearray) -> dicts as classify() gives.");
  bind_classifier_outputs(classifier);
}

void bind_batcher(py::module_& m) {
  const vit::BatcherOptions batcher_defaults;
  py::class_<PyBatcher>(m, "Batcher",
                        "Dynamic batching over a Classifier, as `vit serve` runs it: calls from many threads wait in one\n"
                        "bounded queue and run together, a forward pass as soon as the last ends. The GIL is released\n"
                        "while a call waits.")
      .def(py::init([](py::object classifier, int max_batch, int max_delay_ms, int max_queue) {
             vit::BatcherOptions o;
             o.max_batch = max_batch;
             o.max_delay_ms = max_delay_ms;
             o.max_queue = max_queue;
             if (!py::isinstance<vit::Classifier>(classifier))
               throw py::type_error("Batcher: classifier must be a vit.Classifier, got " + type_name(classifier));
             const vit::Classifier& c = classifier.cast<const vit::Classifier&>();
             auto b = std::make_unique<vit::Batcher>(c, o);
             return PyBatcher{std::move(classifier), std::move(b)};
           }),
           py::arg("classifier"), py::kw_only(), py::arg("max_batch") = batcher_defaults.max_batch,
           py::arg("max_delay_ms") = batcher_defaults.max_delay_ms, py::arg("max_queue") = batcher_defaults.max_queue,
           "classifier: a Classifier made with batch >= max_batch (else a batch runs as several passes);\n"
           "max_batch: images per pass at most; max_delay_ms: extra wait for a fuller batch; max_queue: images\n"
           "waiting at most (past it, a call raises RuntimeError at once).")
      .def("classify_encoded", &batcher_classify_encoded, py::arg("images"), py::arg("topk") = 5,
           "As Classifier.classify_encoded, the images queued with other threads' and run in their batch.")
      .def("classify", &batcher_classify_images, py::arg("images"), py::arg("topk") = 5,
           "Images in memory -> dicts as Classifier.classify gives them, queued with other threads' images: each\n"
           "item a (name, bytes or bytearray) pair of an encoded file, a PIL.Image.Image or a numpy uint8 array\n"
           "[H, W, 3] RGB ([N, H, W, 3] for several), taken as Classifier.classify takes them.")
      .def("embed", &batcher_embed, py::arg("images"), py::kw_only(), py::arg("head") = false, py::arg("tokens") = false,
           py::arg("normalize") = false,
           "Images in memory, as Batcher.classify takes them -> a dict as Classifier.embed gives it, queued with\n"
           "other threads' images (requests with the same options share forward passes).")
      .def_property_readonly("queued", [](const PyBatcher& pb) { return pb.batcher->queued(); }, "Images waiting.")
      .def("close", [](PyBatcher& pb) {
        *pb.closed = true;  // before the Batcher refuses: a call it refuses then says why
        py::gil_scoped_release unlocked;
        pb.batcher->close();
      }, "Refuses new calls (RuntimeError: the Batcher is closed) and answers the queued ones.");
}

}  // namespace

// The module vit._vit, whose names the package vit gives (python/vit/__init__.py); they say so in their
// __module__, so that help() and repr() name vit.Classifier.
PYBIND11_MODULE(_vit, m) {
  m.doc() = "ViT image classification on the CPU (oneDNN), preprocessing and logits as timm's.";
  m.attr("__version__") = VIT_VERSION;

  register_errors(m);

  // The extensions from the code that walks the folders, so the docstring cannot drift from it.
  static const std::string find_images_doc =
      "Image files and folders (str, bytes or os.PathLike) -> the files `vit classify` would classify, in its\n"
      "order: a folder gives its " + vit::image_extensions() + " files (any case), and with videos=True its\n" +
      vit::video_extensions() + " files, recursively, sorted by name. One dict per file: {'file'}, or\n"
      "{'file', 'error'} for a path that does not exist, a broken symbolic link or an entry that cannot be an image.";
  m.def("find_images", &find_images, py::arg("paths"), py::kw_only(), py::arg("videos") = false, find_images_doc.c_str());

  m.def("model_options", &model_options,
        "The model-wide options Classifier() takes, as the command line's flags and `vit serve`'s per-model ones:\n"
        "one dict each, {'name' (the keyword), 'flag' ('--img-size'), 'type' ('int', 'path', 'name' or 'precision'),\n"
        "'default' (None: none), 'min', 'max' (an int's range, else None), 'zero' (what an int's 0 means),\n"
        "'choices' (a precision's names, else None), 'help'}, in the order `vit classify --help` lists them.");

  bind_classifier(m);
  bind_batcher(m);
  for (const char* name : {"Classifier", "Batcher", "find_images", "model_options"}) m.attr(name).attr("__module__") = "vit";
}
