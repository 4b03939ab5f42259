"""`precdx mcp`: the engine as a Model Context Protocol server over stdio (optional extra
`mcp`, the official MCP Python SDK). Tools diagnose a case folder or facts, explain a rule or
failure mode, list the failure modes and plan the next best evidence; every knowledge-base entry
is a resource (`precdx://kb/<failure mode>`)."""
