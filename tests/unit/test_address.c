/* CUDA_REMOTE_ADDR / --listen parsing. */
#include "address.h"
#include "check.h"
#include "error.h"

int main(void)
{
    cr_address_t a;
    CHECK_EQ_INT(cr_address_parse("gpuhost:7471", &a), 0);
    CHECK_EQ_INT(a.is_unix, 0);
    CHECK_EQ_STR(a.host, "gpuhost");
    CHECK_EQ_INT(a.port, 7471);

    CHECK_EQ_INT(cr_address_parse("gpuhost", &a), 0);
    CHECK_EQ_INT(a.port, CR_DEFAULT_PORT);

    CHECK_EQ_INT(cr_address_parse("[::1]:9000", &a), 0);
    CHECK_EQ_STR(a.host, "::1");
    CHECK_EQ_INT(a.port, 9000);

    CHECK_EQ_INT(cr_address_parse("fe80::1", &a), 0); /* bare IPv6: default port */
    CHECK_EQ_STR(a.host, "fe80::1");
    CHECK_EQ_INT(a.port, CR_DEFAULT_PORT);

    CHECK_EQ_INT(cr_address_parse("unix:/run/cuda-remote.sock", &a), 0);
    CHECK_EQ_INT(a.is_unix, 1);
    CHECK_EQ_STR(a.path, "/run/cuda-remote.sock");

    CHECK_EQ_INT(cr_address_parse("127.0.0.1:0", &a), 0); /* listeners: any port */
    CHECK_EQ_INT(a.port, 0);

    CHECK_EQ_INT(cr_address_parse("", &a), CR_EINVAL);
    CHECK_EQ_INT(cr_address_parse(NULL, &a), CR_EINVAL);
    CHECK_EQ_INT(cr_address_parse("host:", &a), CR_EINVAL);
    CHECK_EQ_INT(cr_address_parse("host:65536", &a), CR_EINVAL);
    CHECK_EQ_INT(cr_address_parse("host:12x", &a), CR_EINVAL);
    CHECK_EQ_INT(cr_address_parse(":80", &a), CR_EINVAL);
    CHECK_EQ_INT(cr_address_parse("unix:", &a), CR_EINVAL);
    CHECK_EQ_INT(cr_address_parse("[::1", &a), CR_EINVAL);
    char longpath[200] = "unix:/";
    for (int i = 6; i < 199; i++)
        longpath[i] = 'a';
    longpath[199] = '\0';
    CHECK_EQ_INT(cr_address_parse(longpath, &a), CR_EINVAL);
    CHECK_DONE();
}
