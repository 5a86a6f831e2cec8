#pragma once
// The one line run_job refuses a job with, for the GPTQ job tests that assert it ("(no error)" when it runs).
#include <string>

#include "qgru/base/error.h"
#include "qgru/gptq/job.h"

namespace gptq_test {

inline std::string job_error(const qgru::gptq::JobOptions& job) {
  try {
    qgru::gptq::run_job(job);
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace gptq_test
