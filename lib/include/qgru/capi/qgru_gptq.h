/* The GPTQ C API's former path: the header is qgru/qgru_gptq.h (beside the runtime's qgru/qgru_runtime.h).
 * This one stays so that programs including qgru/capi/qgru_gptq.h keep building unchanged. */
#include "qgru/qgru_gptq.h"
