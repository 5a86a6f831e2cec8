#pragma once
// Random-access reads from a file with errors that name it. Lets the readers validate a header and then
// read each tensor straight into its own buffer, without holding the whole file twice. Only a regular file
// is opened (qgru/base/input_file.h: a FIFO or a device is refused, never read).
#include "qgru/base/input_file.h"

namespace qgru::io_detail {

using FileReader = InputFile;

}  // namespace qgru::io_detail
