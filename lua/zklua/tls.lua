--- zklua.tls — kazoo's TLS client options read into what libzookeeper takes.
--
-- kazoo's use_ssl, certfile, keyfile, keyfile_password, ca and verify_certs become
-- zookeeper_init_ssl's one string "ca,cert,key[,password]" (ZooKeeper 3.8's C client).  What
-- that client cannot do is refused here, with a ConfigurationError saying why, before
-- anything is sent: TLS on a build whose C client has none; verify_certs = false (it always
-- verifies the server's chain); no certfile or keyfile (it always presents a client
-- certificate); a comma in a file name or password (it splits the string at commas).  The
-- files are loaded as the library will load them (core.tls_check): a file that cannot be
-- read, a key its password does not open, or a key that is not the certificate's is an
-- error at once, never a connection that fails for ever.  Without ca, the system's CA bundle.
local core = require "zklua.core"
local errors = require "zklua.errors"

local tls = {}

tls.SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"

local function refuse(message)
  errors.raise(errors.ConfigurationError, "client: " .. message)
end

--- The client's options -> the cert string, or nil for a plaintext client (use_ssl not true:
-- the other TLS options are then ignored, as kazoo ignores them).
function tls.cert_string(opts)
  if not opts.use_ssl then return nil end
  local client = core.zookeeper
  if not client.tls then
    refuse("use_ssl: this zklua is linked with a ZooKeeper C client without TLS (" ..
           client.build .. " " .. client.version .. "); build zklua with `make` " ..
           "(ZK_CLIENT=source, the default), which builds the C client with TLS and SASL " ..
           "from Debian's zookeeper source package")
  end
  if opts.verify_certs == false then
    refuse("verify_certs = false is not possible: ZooKeeper's C client always verifies the " ..
           "server's certificate chain against ca; give ca the CA that signed the server's " ..
           "certificate")
  end
  if opts.certfile == nil or opts.keyfile == nil then
    refuse("use_ssl needs certfile and keyfile: ZooKeeper's C client always presents a " ..
           "client certificate")
  end
  local password = opts.keyfile_password
  if password == "" then password = nil end
  local parts = { opts.ca or tls.SYSTEM_CA, opts.certfile, opts.keyfile, password }
  local names = { "ca", "certfile", "keyfile", "keyfile_password" }
  for i = 1, 4 do
    if parts[i] and parts[i]:find(",", 1, true) then
      refuse(names[i] .. " may not hold a comma: ZooKeeper's C client splits its TLS " ..
             "settings at commas")
    end
  end
  local why = core.tls_check(parts[1], parts[2], parts[3], password)
  if why then refuse("use_ssl: " .. why) end
  return table.concat(parts, ",")
end

return tls
