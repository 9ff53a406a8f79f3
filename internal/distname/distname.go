// Package distname maps Python import names to the distributions that
// provide them, where the two differ (import sklearn -> install
// scikit-learn). It is shared by the import scan (package imports) and the
// hints a failed run gets (package present).
package distname

// distributions maps import names to the distribution that provides them,
// where the two differ. Everything else is installed under its import name
// (numpy, pandas, requests, ...), which is right for most of the package
// registry. Sources: each project's own install instructions.
//
// An empty value means "install nothing": the name is ambiguous (google is
// a namespace shared by dozens of distributions) or the module cannot be
// had from the registry by that name.
var distributions = map[string]string{
	"google":                "",
	"sklearn":               "scikit-learn",
	"skimage":               "scikit-image",
	"cv2":                   "opencv-python",
	"PIL":                   "pillow",
	"yaml":                  "pyyaml",
	"bs4":                   "beautifulsoup4",
	"dateutil":              "python-dateutil",
	"dotenv":                "python-dotenv",
	"jwt":                   "pyjwt",
	"Crypto":                "pycryptodome",
	"Cryptodome":            "pycryptodomex",
	"OpenSSL":               "pyopenssl",
	"serial":                "pyserial",
	"usb":                   "pyusb",
	"magic":                 "python-magic",
	"docx":                  "python-docx",
	"pptx":                  "python-pptx",
	"fitz":                  "pymupdf",
	"attr":                  "attrs",
	"git":                   "gitpython",
	"jose":                  "python-jose",
	"multipart":             "python-multipart",
	"slugify":               "python-slugify",
	"telegram":              "python-telegram-bot",
	"zmq":                   "pyzmq",
	"mpl_toolkits":          "matplotlib",
	"psycopg2":              "psycopg2-binary",
	"MySQLdb":               "mysqlclient",
	"pkg_resources":         "setuptools",
	"dns":                   "dnspython",
	"nacl":                  "pynacl",
	"kafka":                 "kafka-python",
	"ldap":                  "python-ldap",
	"cairo":                 "pycairo",
	"gi":                    "pygobject",
	"wx":                    "wxpython",
	"faiss":                 "faiss-cpu",
	"Levenshtein":           "levenshtein",
	"sentence_transformers": "sentence-transformers",
	"tree_sitter":           "tree-sitter",
	"win32api":              "pywin32",
	"win32con":              "pywin32",
	"pythoncom":             "pywin32",
	"xdist":                 "pytest-xdist",
	"Bio":                   "biopython",
	"osgeo":                 "gdal",
	"pydantic_settings":     "pydantic-settings",
	"googleapiclient":       "google-api-python-client",
	"websocket":             "websocket-client",
	"socks":                 "pysocks",
	"discord":               "discord.py",
	"igraph":                "python-igraph",
	"tensorflow_hub":        "tensorflow-hub",
	"typing_extensions":     "typing-extensions",
}

// ForImport is the distribution that provides the top-level module of
// import name mod, or "" when none should be installed for it (a namespace
// shared by many distributions, or one the registry does not have).
func ForImport(mod string) string {
	for i := 0; i < len(mod); i++ {
		if mod[i] == '.' {
			mod = mod[:i]
			break
		}
	}
	if d, ok := distributions[mod]; ok {
		return d
	}
	return mod
}
