// qgru._qgru: the extension module under the Python package qgru (python/src/qgru/). The package's Python
// layer turns PyTorch modules, state dicts, lists of arrays and batch-first layouts into what these
// functions take; everything that computes is the project's libraries.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <exception>
#include <string>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/qgru_runtime.hpp"
#include "qgru/version.h"

namespace nb = nanobind;

namespace qgru::python {
void bind_toolchain(nb::module_& m);
void bind_runtime(nb::module_& m);
void bind_gptq(nb::module_& m);
void bind_quant_linear(nb::module_& m);
}  // namespace qgru::python

NB_MODULE(_qgru, m) {
  m.doc() = "qgru's libraries for the Python package qgru (use the package, not this module)";
  // Every library failure is a qgru::Error whose message is the line the CLI prints after "qgru: error: ".
  static nb::exception<qgru::Error> error(m, "Error");
  // The runtime C API's wrapper throws qgru_rt::Error ("STATUS_NAME: message"): the same exception, with the
  // C API's one-line message (qgru_rt_last_error()).
  nb::register_exception_translator([](const std::exception_ptr& thrown, void*) {
    try {
      std::rethrow_exception(thrown);
    } catch (const qgru_rt::Error& e) {
      const std::string prefix = std::string(qgru_rt_status_name(e.status())) + ": ";
      const std::string text = e.what();
      const std::string message = text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
      PyErr_SetString(error.ptr(), message.c_str());
    }
  });
  m.attr("version") = QGRU_VERSION_STRING;
  m.attr("runtime_api_version") = qgru_rt_api_version();
  // 0 warnings, 1 info (the CLI's default), 2 debug; the package starts at 0.
  m.def("set_log_verbosity", &qgru::set_log_verbosity, nb::arg("level"));
  qgru::python::bind_toolchain(m);
  qgru::python::bind_runtime(m);
  qgru::python::bind_gptq(m);
  qgru::python::bind_quant_linear(m);
}
