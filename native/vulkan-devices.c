/*
 * gpushare-vulkan-devices — prints the Vulkan physical devices in the order the Vulkan loader
 * enumerates them, which is the order llama.cpp's GGML_VK_VISIBLE_DEVICES indexes.
 *
 * GPU Share never loads Vulkan into its own process (a broken driver must not take the app down):
 * it runs this program with a timeout and reads its output. The program loads the loader itself
 * (libvulkan.so.1, vulkan-1.dll, libvulkan.1.dylib, or the path given as the only argument), so it
 * builds without the Vulkan headers or SDK: the few types it needs are declared in vulkan-types.h,
 * with the values of vulkan_core.h.
 *
 * It creates an instance (apiVersion 1.1, no layers or extensions asked for: implicit layers load
 * as they do for an engine started with the same environment), enumerates the physical devices,
 * and writes one JSON line per device, in enumeration order:
 *
 *   {"index":0,"deviceName":"NVIDIA GeForce RTX 4090","vendorID":4318,"deviceID":9860,
 *    "deviceType":2,"apiVersion":4206847,
 *    "pci":{"domain":0,"bus":1,"device":0,"function":0},
 *    "deviceUUID":"<32 hex digits>"}
 *
 * then a last line {"count":N} (so that a reader can tell a complete list from a cut one).
 * deviceType is VkPhysicalDeviceType (0 other, 1 integrated, 2 discrete, 3 virtual, 4 CPU).
 * "pci" is from VK_EXT_pci_bus_info, null when the device does not list that extension;
 * "deviceUUID" is VkPhysicalDeviceIDProperties.deviceUUID, null on a device older than Vulkan 1.1.
 *
 * Exit status (with one line on stderr for each failure):
 *   0  the list was written (it may be empty: {"count":0})
 *   2  no Vulkan loader could be loaded
 *   3  the loader lacks vkGetInstanceProcAddr or a Vulkan 1.0 entry point
 *   4  vkCreateInstance failed (no driver, an incompatible one)
 *   5  vkEnumeratePhysicalDevices failed
 *   64 usage
 */
#if !defined(_WIN32) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include "vulkan-types.h"

#define EXIT_NO_LOADER 2
#define EXIT_NO_ENTRY_POINT 3
#define EXIT_INSTANCE_FAILED 4
#define EXIT_ENUMERATION_FAILED 5
#define EXIT_USAGE 64

/* ---- The loader ---- */

#if defined(_WIN32)
#define DEFAULT_LOADER "vulkan-1.dll"
#elif defined(__APPLE__)
#define DEFAULT_LOADER "libvulkan.1.dylib"
#else
#define DEFAULT_LOADER "libvulkan.so.1"
#endif

static PFN_vkGetInstanceProcAddr load_loader(const char *path) {
#if defined(_WIN32)
    HMODULE lib = LoadLibraryA(path);
    if (lib == NULL) {
        fprintf(stderr, "no Vulkan loader: %s could not be loaded (Windows error %lu)\n", path, (unsigned long)GetLastError());
        exit(EXIT_NO_LOADER);
    }
    PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)(void *)GetProcAddress(lib, "vkGetInstanceProcAddr");
#else
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        fprintf(stderr, "no Vulkan loader: %s\n", why != NULL ? why : path);
        exit(EXIT_NO_LOADER);
    }
    PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
#endif
    if (gipa == NULL) {
        fprintf(stderr, "the Vulkan loader %s has no vkGetInstanceProcAddr\n", path);
        exit(EXIT_NO_ENTRY_POINT);
    }
    return gipa;
}

static PFN_vkVoidFunction required(PFN_vkGetInstanceProcAddr gipa, VkInstance instance, const char *name) {
    PFN_vkVoidFunction fn = gipa(instance, name);
    if (fn == NULL) {
        fprintf(stderr, "the Vulkan loader has no %s\n", name);
        exit(EXIT_NO_ENTRY_POINT);
    }
    return fn;
}

/* ---- Output ---- */

/* A JSON string: quotes, backslashes and control characters escaped; other bytes as they are
 * (Vulkan's names are UTF-8). */
static void print_json_string(const char *s, size_t cap) {
    putchar('"');
    for (size_t i = 0; i < cap && s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* Whether the device lists VK_EXT_pci_bus_info. */
static int has_pci_bus_info(PFN_vkEnumerateDeviceExtensionProperties enumerate, VkPhysicalDevice device) {
    for (int attempt = 0; attempt < 4; attempt++) {
        uint32_t count = 0;
        if (enumerate(device, NULL, &count, NULL) != VK_SUCCESS || count == 0) return 0;
        VkExtensionProperties *list = calloc(count, sizeof *list);
        if (list == NULL) return 0;
        VkResult result = enumerate(device, NULL, &count, list);
        int found = 0;
        if (result == VK_SUCCESS || result == VK_INCOMPLETE) {
            for (uint32_t i = 0; i < count; i++) {
                if (strncmp(list[i].extensionName, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME, VK_MAX_EXTENSION_NAME_SIZE) == 0) found = 1;
            }
        }
        free(list);
        if (found || result != VK_INCOMPLETE) return found;
        /* VK_INCOMPLETE: the list grew between the two calls; ask again. */
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 || (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))) {
        fprintf(stderr, "usage: gpushare-vulkan-devices [VULKAN_LOADER]\n");
        return EXIT_USAGE;
    }
    const char *loader = argc == 2 ? argv[1] : DEFAULT_LOADER;
    PFN_vkGetInstanceProcAddr gipa = load_loader(loader);

    PFN_vkCreateInstance create_instance = (PFN_vkCreateInstance)required(gipa, NULL, "vkCreateInstance");
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "gpushare-vulkan-devices", 1, "gpu-share", 1, VK_API_VERSION_1_1};
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
    VkInstance instance = NULL;
    VkResult created = create_instance(&info, NULL, &instance);
    if (created != VK_SUCCESS || instance == NULL) {
        fprintf(stderr, "vkCreateInstance failed: VkResult %d\n", (int)created);
        return EXIT_INSTANCE_FAILED;
    }

    PFN_vkDestroyInstance destroy_instance = (PFN_vkDestroyInstance)required(gipa, instance, "vkDestroyInstance");
    PFN_vkEnumeratePhysicalDevices enumerate_devices = (PFN_vkEnumeratePhysicalDevices)required(gipa, instance, "vkEnumeratePhysicalDevices");
    PFN_vkGetPhysicalDeviceProperties get_properties = (PFN_vkGetPhysicalDeviceProperties)required(gipa, instance, "vkGetPhysicalDeviceProperties");
    PFN_vkEnumerateDeviceExtensionProperties enumerate_extensions = (PFN_vkEnumerateDeviceExtensionProperties)required(gipa, instance, "vkEnumerateDeviceExtensionProperties");
    /* Core in 1.1; absent from a 1.0 loader, where no device gets a UUID or bus id. */
    PFN_vkGetPhysicalDeviceProperties2 get_properties2 = (PFN_vkGetPhysicalDeviceProperties2)gipa(instance, "vkGetPhysicalDeviceProperties2");

    VkPhysicalDevice *devices = NULL;
    uint32_t count = 0;
    VkResult listed = VK_INCOMPLETE;
    for (int attempt = 0; attempt < 4 && listed == VK_INCOMPLETE; attempt++) {
        listed = enumerate_devices(instance, &count, NULL);
        if (listed != VK_SUCCESS) break;
        free(devices);
        devices = count == 0 ? NULL : calloc(count, sizeof *devices);
        if (count != 0 && devices == NULL) {
            fprintf(stderr, "out of memory for %u devices\n", (unsigned)count);
            return EXIT_ENUMERATION_FAILED;
        }
        if (count != 0) listed = enumerate_devices(instance, &count, devices);
    }
    if (listed != VK_SUCCESS) {
        fprintf(stderr, "vkEnumeratePhysicalDevices failed: VkResult %d\n", (int)listed);
        destroy_instance(instance, NULL);
        return EXIT_ENUMERATION_FAILED;
    }

    for (uint32_t i = 0; i < count; i++) {
        static VkPhysicalDeviceProperties props;
        memset(&props, 0, sizeof props);
        get_properties(devices[i], &props);

        int have_ids = get_properties2 != NULL && props.apiVersion >= VK_API_VERSION_1_1;
        int have_pci = have_ids && has_pci_bus_info(enumerate_extensions, devices[i]);
        VkPhysicalDevicePCIBusInfoPropertiesEXT pci;
        memset(&pci, 0, sizeof pci);
        pci.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
        VkPhysicalDeviceIDProperties ids;
        memset(&ids, 0, sizeof ids);
        ids.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
        ids.pNext = have_pci ? &pci : NULL;
        if (have_ids) {
            static VkPhysicalDeviceProperties2 props2;
            memset(&props2, 0, sizeof props2);
            props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
            props2.pNext = &ids;
            get_properties2(devices[i], &props2);
        }

        printf("{\"index\":%u,\"deviceName\":", (unsigned)i);
        print_json_string(props.deviceName, sizeof props.deviceName);
        printf(",\"vendorID\":%u,\"deviceID\":%u,\"deviceType\":%d,\"apiVersion\":%u,\"pci\":",
               (unsigned)props.vendorID, (unsigned)props.deviceID, (int)props.deviceType, (unsigned)props.apiVersion);
        if (have_pci) {
            printf("{\"domain\":%u,\"bus\":%u,\"device\":%u,\"function\":%u}", (unsigned)pci.pciDomain, (unsigned)pci.pciBus,
                   (unsigned)pci.pciDevice, (unsigned)pci.pciFunction);
        } else {
            printf("null");
        }
        printf(",\"deviceUUID\":");
        if (have_ids) {
            putchar('"');
            for (int b = 0; b < VK_UUID_SIZE; b++) printf("%02x", ids.deviceUUID[b]);
            putchar('"');
        } else {
            printf("null");
        }
        printf("}\n");
    }
    printf("{\"count\":%u}\n", (unsigned)count);
    fflush(stdout);
    free(devices);
    destroy_instance(instance, NULL);
    return 0;
}
