/* Building the hello and finding the server (see hello.h). */
#include "hello.h"

#include <stdlib.h>
#include <unistd.h>

#include "address.h"
#include "frame.h"
#include "mpfield.h"

const char *cr_hello_address(void)
{
    const char *text = getenv("CUDA_REMOTE_ADDR");
    return text && *text ? text : CR_DEFAULT_ADDR;
}

void cr_hello_pack(msgpack_packer *pk, int cuda_version, const char *client, const char *program)
{
    char host[256] = "", exe[512] = "";
    gethostname(host, sizeof host - 1);
    if (!program) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        program = exe;
    }
    const char *token = getenv("CUDA_REMOTE_TOKEN");

    msgpack_pack_map(pk, 7);
    cr_mp_pack_str(pk, "protocol");
    msgpack_pack_uint32(pk, CR_PROTOCOL_VERSION);
    cr_mp_pack_str(pk, "cuda_version");
    msgpack_pack_int(pk, cuda_version);
    cr_mp_pack_str(pk, "client");
    cr_mp_pack_str(pk, client);
    cr_mp_pack_str(pk, "pid");
    msgpack_pack_int(pk, (int)getpid());
    cr_mp_pack_str(pk, "host");
    cr_mp_pack_str(pk, host);
    cr_mp_pack_str(pk, "program");
    cr_mp_pack_str(pk, program);
    cr_mp_pack_str(pk, "token");
    if (token)
        cr_mp_pack_str(pk, token);
    else
        msgpack_pack_nil(pk);
}

void cr_hello_refusal(const msgpack_object *reply, char *why, size_t cap)
{
    const msgpack_object *o = NULL;
    if (reply && reply->type == MSGPACK_OBJECT_ARRAY && reply->via.array.size >= 2)
        o = &reply->via.array.ptr[1];
    cr_mp_copy_str(why, cap, o);
}
