"""The names :mod:`kernel_harness.run.source_rules` looks for in an implementation's source,
by kind (dotted, after resolving the module's aliases), the kinds, and the packages it never
reads."""

from __future__ import annotations

#: The kinds of finding (each says what such a line can do).
OBSERVES = "observes the harness"
CLOCK_KIND = "reads the clock"
STATE = "keeps state across calls"
TRACED = "tells traced from eager"
PRECISION_KIND = "reads jax's precision context"
BACKEND_KIND = "branches on the backend"
PROCESS_KIND = "reads the process or host"
CONFIG_KIND = "reads jax's configuration"
ALIASING_KIND = "tells aliased arguments apart"

#: Packages whose code is not the implementation's: neither read nor followed.
TRUSTED = frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "hypothesis", "pytest",
                     "_pytest", "kernel_harness", "scipy", "opt_einsum", "typing_extensions"})

#: Dotted names (after resolving the module's aliases) each kind looks for.
OBSERVE = frozenset({
    "sys.modules", "sys._getframe", "sys.settrace", "sys.gettrace", "sys.setprofile",
    "sys.getprofile", "sys.argv", "inspect.stack", "inspect.currentframe",
    "inspect.getouterframes", "inspect.trace", "inspect.getframeinfo",
    "traceback.extract_stack", "traceback.format_stack", "traceback.walk_stack",
    "traceback.print_stack", "gc.get_referrers", "gc.get_objects", "builtins.__import__",
    "importlib.util.find_spec", "os.environ.PYTEST_CURRENT_TEST",
})
CLOCK = frozenset({
    "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
    "time.perf_counter_ns", "time.process_time", "time.localtime", "time.gmtime",
    "time.ctime", "datetime.date.today", "datetime.datetime.now", "datetime.datetime.today",
    "datetime.datetime.utcnow", "time.strftime", "time.asctime", "time.clock_gettime",
    "time.clock_gettime_ns", "time.thread_time", "time.thread_time_ns", "os.times",
    "uuid.uuid1", "uuid.uuid6", "uuid.uuid7",  # time-based: a clock read by another name
})
#: What differs between processes and hosts (round 8: one process in 61 by its pid, a TPU
#: pod's host list in the environment): a check's process is not a user's.
PROCESS = frozenset({"os.getpid", "os.getppid", "os.environ", "os.getenv", "os.environb",
                     "os.getlogin", "os.uname", "os.urandom", "socket.gethostname",
                     "platform.node", "uuid.uuid4", "uuid.getnode"})
#: Modules any of whose functions draws unseeded randomness or reads the process.
PROCESS_MODULES = frozenset({"random", "secrets"})
#: Attributes only a concrete array has, not a tracer (round 8: ``hasattr(x,
#: "copy_to_host_async")`` to tell an eager call from a traced one).
CONCRETE_ONLY = frozenset({"copy_to_host_async", "addressable_shards", "addressable_data",
                           "is_fully_addressable", "unsafe_buffer_pointer",
                           "on_device_size_in_bytes", "device_buffer", "device_buffers",
                           "is_deleted", "_value", "_npy_value", "_arrays"})
#: Modules whose attributes a kernel has no reason to read by a computed name
#: (``getattr(sys, "mod" + "ules")``: a lookup spelled so that no line names it).
INTROSPECTION = frozenset({"sys", "os", "inspect", "traceback", "gc", "builtins", "importlib",
                           "time", "datetime", "uuid"})
#: Calls that read or write a file: state that outlives the call and the process (a
#: counter kept in a temp file).
FILES = frozenset({"open", "io.open", "os.open", "os.fdopen", "os.path.getsize",
                   "os.path.getmtime", "os.stat", "shelve.open", "dbm.open", "sqlite3.connect",
                   # a directory as a marker (round 7: os.makedirs, then os.listdir)
                   "os.listdir", "os.scandir", "os.makedirs", "os.mkdir", "os.path.exists",
                   "os.path.isdir", "os.path.isfile", "os.remove", "os.unlink", "os.rename",
                   "os.replace", "os.rmdir", "os.walk", "glob.glob", "glob.iglob",
                   "shutil.rmtree", "tempfile.mkstemp", "tempfile.mkdtemp",
                   "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile"})
FILE_METHODS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "mkdir",
                          "iterdir", "touch", "unlink", "rmdir", "is_dir", "is_file"})
#: Attributes of a ``functools`` cache that count the process's calls (round 7: a bomb
#: after 600 shapes read from ``cache_info().currsize``).
CACHE_STATS = frozenset({"cache_info", "cache_parameters", "currsize"})
#: Methods that change a list, dict, set or array in place (a call counter need not add).
MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop",
                       "popitem", "remove", "discard", "clear", "__setitem__", "fill"})
TRACER = ("jax.core.Tracer", "jax._src.core.Tracer", "jax.core.is_concrete",
           "jax._src.core.is_concrete")
PRECISION = ("default_matmul_precision.value", "jax.config.jax_default_matmul_precision")
#: Calls that change jax's configuration for the whole process (any dotted name under jax
#: ending so: ``jax.config.update``, ``jax._src.config.config.update``).
CONFIG_WRITES = (".config.update", ".config.parse_flags_with_absl")
BACKEND = ("jax.default_backend", "jax._src.xla_bridge.default_backend")
#: Strings naming the harness or the test runners.
NAMES = ("kernel_harness", "hypothesis", "pytest", "PYTEST_CURRENT_TEST")
