"""The backend plumbing: connect to a server, guard it, name keys, load Lua, run throwaway servers."""
