// Transport selection and the verbs probe. Verbs code is compiled only with TG_HAVE_VERBS (binding.gyp sets it
// when <infiniband/verbs.h> exists); at run time it is chosen only when ibv_get_device_list reports a device.
#include <string>

#include "transport.h"
#ifdef TG_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

namespace tg {
#ifdef TG_HAVE_VERBS
std::unique_ptr<Transport> makeVerbsTransport(ibv_device* dev, std::string& error);
#endif

VerbsProbe probeVerbs() {
  VerbsProbe p;
#ifdef TG_HAVE_VERBS
  p.compiled = true;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    p.detail = "ibv_get_device_list failed (no RDMA subsystem)";
    return p;
  }
  p.devices = n;
  p.detail = n == 0 ? "no RDMA device found" : std::string("first device ") + ibv_get_device_name(list[0]);
  ibv_free_device_list(list);
#else
  p.detail = "built without libibverbs headers";
#endif
  return p;
}

std::unique_ptr<Transport> makeTransport(const std::string& preferred, std::string& fallback) {
  fallback.clear();
  if (preferred == "tcp") return makeTcpTransport();
  VerbsProbe probe = probeVerbs();
#ifdef TG_HAVE_VERBS
  if (probe.devices > 0) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    std::string error;
    std::unique_ptr<Transport> t = list != nullptr && n > 0 ? makeVerbsTransport(list[0], error) : nullptr;
    if (list != nullptr) ibv_free_device_list(list);
    if (t) return t;
    fallback = "verbs transport unavailable (" + error + "); falling back to TCP";
    return makeTcpTransport();
  }
#endif
  fallback = std::string("verbs transport unavailable (") + (probe.compiled ? "compiled in; " : "") + probe.detail +
             "); falling back to TCP";
  return makeTcpTransport();
}
}  // namespace tg
