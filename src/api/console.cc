#include "api/console.h"

#include <cstring>

#include "api/console_assets.h"

namespace hone::api {

bool ConsoleBuiltIn() { return !ConsoleAssets().empty(); }

void AddConsoleHeaders(HttpResponse* r) {
  // Scripts, styles, images and fetches from this server alone: no inline
  // script, nothing from another origin, no framing (clickjacking).
  r->headers["Content-Security-Policy"] =
      "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";
  r->headers["X-Frame-Options"] = "DENY";
  r->headers["X-Content-Type-Options"] = "nosniff";
  r->headers["Referrer-Policy"] = "no-referrer";
  // The files change with the binary: revalidate rather than cache stale ones.
  r->headers["Cache-Control"] = "no-cache";
}

HttpResponse ConsoleFile(const std::string& path) {
  HttpResponse r;
  AddConsoleHeaders(&r);
  if (path == "/ui") {
    r.status = 308;
    r.headers["Location"] = "/ui/";
    r.content_type = "text/plain; charset=utf-8";
    r.body = "the console is at /ui/\n";
    return r;
  }
  if (ConsoleAssets().empty()) {
    r.status = 404;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "this hone was built without the web console (-DHONE_CONSOLE=OFF)\n";
    return r;
  }
  const std::string name = path == "/ui/" ? "index.html" : path.substr(std::strlen("/ui/"));
  for (const ConsoleAsset& a : ConsoleAssets()) {
    if (name != a.name) continue;
    r.content_type = a.content_type;
    r.body.assign(reinterpret_cast<const char*>(a.data), a.size);
    return r;
  }
  r.status = 404;
  r.content_type = "text/plain; charset=utf-8";
  r.body = "no such console file: " + name + "\n";
  return r;
}

}  // namespace hone::api
