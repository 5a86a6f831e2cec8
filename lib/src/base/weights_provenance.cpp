#include "qgru/base/weights_provenance.h"

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/message_text.h"

namespace qgru {

void require_same_weights(const std::string& recorded_by, const std::string& recorded_sha256,
                          const std::string& model_name, const std::string& model_sha256, bool allow) {
  if (recorded_sha256.empty()) {
    log()->warn("{}: records no sha256 of its float weights; cannot check that it belongs to --model {}",
                printable(recorded_by), printable(model_name));
    return;
  }
  if (model_sha256 == recorded_sha256) return;
  const std::string message = recorded_by + " was made from other float weights (sha256 " + recorded_sha256 +
                              ") than --model " + model_name + " (sha256 " + model_sha256 + ")";
  if (!allow) throw Error(message + "; use the matching files, or --allow-model-mismatch to go on anyway");
  log()->warn("{} (--allow-model-mismatch: going on)", printable(message));
}

}  // namespace qgru
