# Writes every target of the build (its type, folder, sources, the files it
# owns besides them, and its link lists) to a manifest that
# scripts/check_layering.py reads: the check that each target includes only
# headers of its own and of the targets in its link closure. Every include
# is root-relative (one include directory, the repository root), so the
# link lists are the layering's only statement, and this is what holds the
# code to them.
#
# kvfleet_owns(target file...) claims files a target's sources do not name:
# header-only parts of a folder several targets share, and sources compiled
# through generated wrappers.
function(kvfleet_owns target)
  set(files)
  foreach(f ${ARGN})
    get_filename_component(abs ${f} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND files ${abs})
  endforeach()
  set_property(TARGET ${target} APPEND PROPERTY KVFLEET_OWNS ${files})
endfunction()

function(kvfleet_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    kvfleet_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(kvfleet_write_layering_manifest path)
  kvfleet_collect_targets(${PROJECT_SOURCE_DIR} targets)
  set(text "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    # One line per property: target, property, value (a ;-list).
    string(APPEND text "${t}\tTYPE\t${type}\n${t}\tSOURCE_DIR\t${dir}\n")
    foreach(prop SOURCES LINK_LIBRARIES INTERFACE_LINK_LIBRARIES INTERFACE_SOURCES KVFLEET_OWNS)
      get_target_property(v ${t} ${prop})
      if(NOT v)
        set(v "")
      endif()
      string(APPEND text "${t}\t${prop}\t${v}\n")
    endforeach()
  endforeach()
  file(WRITE ${path} "${text}")
endfunction()
