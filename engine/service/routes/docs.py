"""API pages that work without internet access: /docs (Swagger UI) and /redoc (ReDoc) load
their scripts and styles from this server (the assets the `fastapi-offline` package ships), never
from a CDN. Without that package, /docs is a self-contained page rendered here from the OpenAPI
schema (every operation with its parameters, bodies and answers) and /redoc points to it.
`PRECDX_DOCS=off` removes both pages (/openapi.json stays)."""
from __future__ import annotations

import html
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from precdx.service.errors import ServiceError

ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
          "redoc.standalone.js": "text/javascript", "favicon.png": "image/png"}
ASSET_PATH = "/docs/assets"

router = APIRouter(include_in_schema=False)


def asset_folder() -> Path | None:
    try:
        import fastapi_offline
    except ImportError:
        return None
    folder = Path(fastapi_offline.__file__).parent / "static"
    return folder if all((folder / name).is_file() for name in ASSETS) else None


@router.get("/docs")
async def swagger(request: Request) -> Response:
    root = request.scope.get("root_path", "")
    app = request.app
    if asset_folder() is None:
        return HTMLResponse(reference_page(app.openapi(), root))
    from fastapi.openapi.docs import get_swagger_ui_html

    return get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} — API",
        swagger_js_url=f"{root}{ASSET_PATH}/swagger-ui-bundle.js", swagger_css_url=f"{root}{ASSET_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSET_PATH}/favicon.png", oauth2_redirect_url=None,
        swagger_ui_parameters={"validatorUrl": None, "defaultModelsExpandDepth": 0})


@router.get("/redoc")
async def redoc(request: Request) -> Response:
    root = request.scope.get("root_path", "")
    app = request.app
    if asset_folder() is None:
        return RedirectResponse(f"{root}/docs")
    from fastapi.openapi.docs import get_redoc_html

    return get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} — API",
                          redoc_js_url=f"{root}{ASSET_PATH}/redoc.standalone.js",
                          redoc_favicon_url=f"{root}{ASSET_PATH}/favicon.png", with_google_fonts=False)


@router.get(ASSET_PATH + "/{name}")
async def asset(name: str) -> Response:
    folder = asset_folder()
    if folder is None or name not in ASSETS:
        raise ServiceError(404, "not_found", f"no documentation asset {name!r}")
    return FileResponse(folder / name, media_type=ASSETS[name], headers={"Cache-Control": "public, max-age=86400"})


# ---------------------------------------------------------------- the page without Swagger UI
def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _schema_name(schema: dict) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema or "oneOf" in schema:
        return " | ".join(_schema_name(s) for s in schema.get("anyOf", schema.get("oneOf", [])))
    if schema.get("type") == "array":
        return f"list of {_schema_name(schema.get('items', {}))}"
    return str(schema.get("type", "object"))


def reference_page(spec: dict, root: str = "") -> str:
    """Every operation of `spec` and every schema of its components, as one page with no
    script and no outside resource."""
    out = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{_e(spec['info']['title'])} — API</title>",
           "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:1000px;margin:0 auto;padding:20px;color:#1f2328}"
           "code,pre{font-family:ui-monospace,monospace;font-size:13px}.op{border:1px solid #d0d7de;border-radius:6px;"
           "padding:10px 14px;margin:12px 0}.m{font-weight:700;text-transform:uppercase;margin-right:8px}"
           "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #d0d7de;padding:4px 6px;"
           "text-align:left;vertical-align:top}</style></head><body>",
           f"<h1>{_e(spec['info']['title'])} {_e(spec['info'].get('version'))}</h1>",
           f"<p>{_e(spec['info'].get('description'))}</p>",
           f"<p>The machine-readable schema: <a href=\"{_e(root)}/openapi.json\"><code>/openapi.json</code></a></p>",
           "<h2>Operations</h2>"]
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            if not isinstance(op, dict):
                continue
            out.append(f"<div class=\"op\"><span class=\"m\">{_e(method)}</span><code>{_e(path)}</code>"
                       f" — {_e(op.get('summary'))}")
            if op.get("description"):
                out.append(f"<p>{_e(op['description'])}</p>")
            params = op.get("parameters", [])
            if params:
                out.append("<table><tr><th>parameter</th><th>in</th><th>type</th><th>description</th></tr>")
                for p in params:
                    out.append(f"<tr><td><code>{_e(p.get('name'))}</code></td><td>{_e(p.get('in'))}</td>"
                               f"<td>{_e(_schema_name(p.get('schema', {})))}</td><td>{_e(p.get('description'))}</td></tr>")
                out.append("</table>")
            body = op.get("requestBody", {}).get("content", {})
            if body:
                out.append("<p>body: " + ", ".join(f"<code>{_e(k)}</code> ({_e(_schema_name(v.get('schema', {})))})"
                                                   for k, v in body.items()) + "</p>")
            answers = ", ".join(f"{_e(code)} {_e(r.get('description'))}" for code, r in op.get("responses", {}).items())
            out.append(f"<p>answers: {answers}</p></div>")
    out.append("<h2>Schemas</h2>")
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        out.append(f"<h3 id=\"{_e(name)}\">{_e(name)}</h3>")
        if schema.get("description"):
            out.append(f"<p>{_e(schema['description'])}</p>")
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", ()))
            out.append("<table><tr><th>field</th><th>type</th><th>description</th></tr>")
            for field, sub in props.items():
                mark = " (required)" if field in required else ""
                out.append(f"<tr><td><code>{_e(field)}</code>{mark}</td><td>{_e(_schema_name(sub))}</td>"
                           f"<td>{_e(sub.get('description'))}</td></tr>")
            out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)
