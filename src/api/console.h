// `hone serve`'s web console at /ui/: its embedded files, answered with the
// headers that keep a page safe (a Content-Security-Policy of 'self' only, no
// framing, no sniffing). The page then calls the same API any client does.
#pragma once

#include <string>

#include "api/http_types.h"

namespace hone::api {

// GET /ui, /ui/ and /ui/<file>: the file, a redirect to /ui/, or 404.
HttpResponse ConsoleFile(const std::string& path);

// Whether this binary carries the console (built with HONE_CONSOLE=ON).
bool ConsoleBuiltIn();

// The security headers every console answer carries (tests read them).
void AddConsoleHeaders(HttpResponse* r);

}  // namespace hone::api
