"""redis-race-lab helpers: backends, key namespaces, Lua loading and the race lab.

Nothing runs on import; notebooks import the names they use, e.g.
``from helpers import connect``.
"""

from helpers.backend import Capabilities, Lab, connect
from helpers.guard import UnsafeCommandError
from helpers.namespace import Namespace
from helpers.scripts import load_script, lua_source, script_header

__all__ = ["Capabilities", "Lab", "Namespace", "UnsafeCommandError", "connect",
           "load_script", "lua_source", "script_header"]
