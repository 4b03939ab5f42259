"""The HTTP API's routes, one APIRouter per concern: `meta` (health and catalogues),
`diagnose` (one-shot diagnosis of facts or an uploaded case) and `sessions` (chat sessions that
ask for the next best evidence). precdx.service.app mounts them under /v1 (health at the root)."""
