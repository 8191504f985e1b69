{
  "variables": {
    "have_verbs%": "<!(node -p \"require('fs').existsSync('/usr/include/infiniband/verbs.h') ? 1 : 0\")"
  },
  "targets": [
    {
      "target_name": "tidegate_dataplane",
      "sources": [
        "src/addon.cc",
        "src/endpoint_wrap.cc",
        "src/checksum.cc",
        "src/store.cc",
        "src/measure.cc",
        "src/tcp_transport.cc",
        "src/net_util.cc",
        "src/tcp_send.cc",
        "src/tcp_receive.cc",
        "src/tcp_runner.cc",
        "src/select.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "conditions": [
        ["have_verbs==1", {
          "sources": ["src/verbs_transport.cc", "src/verbs_qp.cc", "src/verbs_runner.cc"],
          "defines": ["TG_HAVE_VERBS=1"],
          "libraries": ["-libverbs"]
        }]
      ]
    }
  ]
}
